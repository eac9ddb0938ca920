// tern-server's command line: its flags into ServerOptions, and what they set up around the
// model (the connection gate's limits, the open-file limit, the warning for an open server).
#pragma once

#include <CLI/CLI.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "tools/common/model_options.h"
#include "tools/server/connection_gate.h"

namespace tern::server {

struct ServerOptions {
  std::string bundle, host = "127.0.0.1", api_key, grammar_memory = "8M";
  cli::ModelOptions model;  // --memory-budget, --kv, --ctx, --threads
  int port = 8080;
  unsigned sessions = 1, timeout = 600, queue = 16;
  unsigned grammar_compile_ms = 1000;  // a request's grammar compile is stopped past it; 0: no limit
  size_t max_body = 1 << 20;
  // Connection limits (ConnectionGate): seconds for a request's head, its body, an idle
  // keep-alive connection and a stalled write; open connections before a fast 503.
  double header_timeout = 10, body_timeout = 30, idle_timeout = 5, write_timeout = 30;
  size_t max_connections = 512;
  // Open connections from one remote address; 0: a quarter of max_connections (at least 1).
  size_t max_connections_per_client = 0;
  // --api-key-file and TERN_API_KEY fill api_key (resolve_api_key).
  std::string api_key_file;
  std::string alias;                      // the model's advertised name; empty: the bundle's file name
  std::vector<std::string> cors_origins;  // origins browsers may call from ("*": any); empty: no CORS
};

// Whether a request's Origin header may read replies (--cors-origin): the value the
// Access-Control-Allow-Origin header then takes ("*" or the origin), or empty.
std::string cors_allowed_origin(const ServerOptions& opt, const std::string& origin);

// Every flag of tern-server, bound to `opt`.
void add_server_options(CLI::App& app, ServerOptions* opt);

// What the gate allows: the connection flags, and workers for every slot and queue place.
GateLimits gate_limits(const ServerOptions& opt);

// Every connection is a descriptor: make room for the limit (the soft limit is often 1,024),
// or lower the limit to what fits, and say so.
void fit_open_file_limit(ServerOptions* opt);

// The API key from --api-key (discouraged: other users see it in /proc/PID/cmdline),
// --api-key-file (its first line; a file others may read is refused) or the environment
// variable TERN_API_KEY, at most one of them; false (and why, on stderr) when it cannot be read.
bool resolve_api_key(ServerOptions* opt);

// Anyone who can reach a non-loopback address can use the server unless a key is required.
void warn_if_open_to_the_network(const ServerOptions& opt);

}  // namespace tern::server
