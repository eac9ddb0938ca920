// tern-server's flags and the limits they set (server_options.h).
#include "tools/server/server_options.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>

namespace tern::server {

namespace {

void add_connection_options(CLI::App& app, ServerOptions* opt) {
  app.add_option("--header-timeout", opt->header_timeout,
                 "seconds for a request line and headers to arrive (default 10); then 408")
      ->check(CLI::Range(0.05, 3600.0));
  app.add_option("--body-timeout", opt->body_timeout,
                 "seconds for a request body to arrive after its head (default 30)")
      ->check(CLI::Range(0.05, 3600.0));
  app.add_option("--idle-timeout", opt->idle_timeout, "seconds an idle keep-alive connection stays open (default 5)")
      ->check(CLI::Range(0.05, 3600.0));
  app.add_option("--write-timeout", opt->write_timeout,
                 "seconds a response write may make no progress before the client is dropped (default 30)")
      ->check(CLI::Range(0.05, 3600.0));
  app.add_option("--max-connections", opt->max_connections, "open connections; more get an immediate 503 (default 512)")
      ->check(CLI::Range(size_t{1}, size_t{65536}));
}

std::chrono::milliseconds ms(double seconds) { return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1e3)); }

}  // namespace

void add_server_options(CLI::App& app, ServerOptions* opt) {
  app.add_option("MODEL", opt->bundle, ".tern bundle")->required();
  app.add_option("--host", opt->host, "address to listen on (default 127.0.0.1: this machine only)");
  app.add_option("--port", opt->port, "port (default 8080; 0 picks a free one and prints it)")
      ->check(CLI::Range(0, 65535));
  cli::add_memory_budget_option(app, &opt->model.memory_budget);
  cli::add_kv_option(app, &opt->model.kv);
  cli::add_ctx_option(app, &opt->model.ctx);
  app.add_option("--sessions", opt->sessions, "concurrent session slots (default 1)")->check(CLI::Range(1u, 256u));
  cli::add_threads_option(app, &opt->model.threads);
  app.add_option("--api-key", opt->api_key, "require 'Authorization: Bearer KEY' on every endpoint but /health");
  app.add_option("--timeout", opt->timeout, "seconds a request may wait for a slot (default 600)")
      ->check(CLI::Range(1u, 86400u));
  app.add_option("--queue", opt->queue, "requests that may wait for a slot (default 16); more get 503")
      ->check(CLI::Range(0u, 4096u));
  app.add_option("--max-body", opt->max_body, "largest request body in bytes (default 1 MiB); more gets 413");
  add_connection_options(app, opt);
  app.add_option("--grammar-memory", opt->grammar_memory,
                 "memory per slot for response_format / tools grammars (default 8M; 0: refuse them)");
}

GateLimits gate_limits(const ServerOptions& opt) {
  GateLimits l;
  l.max_connections = opt.max_connections;
  l.header_timeout = ms(opt.header_timeout);
  l.body_timeout = ms(opt.body_timeout);
  l.idle_timeout = ms(opt.idle_timeout);
  l.write_timeout = ms(opt.write_timeout);
  l.request.max_body_bytes = opt.max_body;
  l.max_buffered_bytes = std::max<size_t>(32u << 20, 32 * opt.max_body);
  // A worker for every slot and every place in the queue, and a few more so requests beyond
  // them get their 503 at once; GET requests (/health) have workers of their own.
  l.workers = opt.sessions + opt.queue + 4;
  l.light_workers = 2;
  return l;
}

void fit_open_file_limit(ServerOptions* opt) {
  const rlim_t reserve = 64;  // the bundle, stdio, the gate's pipe, logs
  const rlim_t need = static_cast<rlim_t>(opt->max_connections) + GateLimits().max_lingering + reserve;
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= need) return;
  rlimit raised = r;
  raised.rlim_cur = std::min(need, r.rlim_max);
  if (setrlimit(RLIMIT_NOFILE, &raised) == 0) r = raised;
  if (r.rlim_cur >= need) return;
  const size_t fits = r.rlim_cur > GateLimits().max_lingering + reserve
                          ? static_cast<size_t>(r.rlim_cur - GateLimits().max_lingering - reserve)
                          : 1;
  std::fprintf(stderr, "tern-server: --max-connections %zu lowered to %zu (the open-file limit is %llu)\n",
               opt->max_connections, fits, static_cast<unsigned long long>(r.rlim_cur));
  opt->max_connections = fits;
}

void warn_if_open_to_the_network(const ServerOptions& opt) {
  const bool loopback = opt.host == "localhost" || opt.host == "::1" || opt.host.rfind("127.", 0) == 0;
  if (loopback || !opt.api_key.empty()) return;
  std::fprintf(stderr,
               "tern-server: warning: listening on %s without --api-key: anyone who can reach this address can use "
               "the model (and its CPU and memory); set --api-key, or keep the default 127.0.0.1 behind a proxy\n",
               opt.host.c_str());
}

}  // namespace tern::server
