// tern-server's flags and the limits they set (server_options.h).
#include "tools/server/server_options.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

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
  app.add_option("--max-connections-per-client", opt->max_connections_per_client,
                 "open connections from one address; more get an immediate 503 (default: a quarter of "
                 "--max-connections; behind a reverse proxy, which is one address, set it to --max-connections)")
      ->check(CLI::Range(size_t{0}, size_t{65536}));
}

// --cors-origin: "*", or an origin as browsers send it: scheme://host[:port], no path.
std::string check_origin(const std::string& o) {
  if (o == "*") return "";
  const size_t colon = o.find("://");
  bool ok = colon != std::string::npos && colon > 0 && colon + 3 < o.size();
  for (size_t i = 0; ok && i < o.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(o[i]);
    ok = c > 0x20 && c < 0x7f && (c != '/' || (i > colon && i < colon + 3));
  }
  return ok ? "" : "'" + o + "' is not an origin: scheme://host[:port] (e.g. https://app.example.com) or *";
}

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

std::chrono::milliseconds ms(double seconds) { return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1e3)); }

}  // namespace

std::string cors_allowed_origin(const ServerOptions& opt, const std::string& origin) {
  if (opt.cors_origins.empty() || origin.empty()) return "";
  const std::string o = lowercase(origin);
  for (const std::string& allowed : opt.cors_origins) {
    if (allowed == "*") return "*";
    if (lowercase(allowed) == o) return origin;
  }
  return "";
}

void add_server_options(CLI::App& app, ServerOptions* opt) {
  app.add_option("MODEL", opt->bundle, ".tern bundle")->required();
  app.add_option("--alias", opt->alias,
                 "the model's name in /v1/models and in replies (default: the bundle's file name without .tern); "
                 "requests may name the model anything")
      ->check([](const std::string& a) {
        for (const char c : a) {
          if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return std::string("--alias has a control character");
        }
        return a.empty() ? std::string("--alias is empty") : std::string();
      });
  app.add_option("--cors-origin", opt->cors_origins,
                 "let browser apps from ORIGIN (scheme://host[:port], or * for any) call the API: answers CORS "
                 "preflights and marks replies readable (repeatable; default: no CORS)")
      ->check(check_origin);
  app.add_option("--host", opt->host, "address to listen on (default 127.0.0.1: this machine only)");
  app.add_option("--port", opt->port, "port (default 8080; 0 picks a free one and prints it)")
      ->check(CLI::Range(0, 65535));
  cli::add_memory_budget_option(app, &opt->model.memory_budget);
  cli::add_kv_option(app, &opt->model.kv);
  cli::add_ctx_option(app, &opt->model.ctx);
  app.add_option("--sessions", opt->sessions, "concurrent session slots (default 1)")->check(CLI::Range(1u, 256u));
  cli::add_threads_option(app, &opt->model.threads);
  cli::add_verify_bundle_option(app, &opt->model.verify_bundle);
  app.add_option("--api-key", opt->api_key,
                 "require 'Authorization: Bearer KEY' on every endpoint but /health (visible to other users in the "
                 "process list: prefer --api-key-file or TERN_API_KEY)");
  app.add_option("--api-key-file", opt->api_key_file,
                 "read the API key from the first line of FILE (not readable by others)");
  app.add_option("--timeout", opt->timeout, "seconds a request may wait for a slot (default 600)")
      ->check(CLI::Range(1u, 86400u));
  app.add_option("--queue", opt->queue, "requests that may wait for a slot (default 16); more get 503")
      ->check(CLI::Range(0u, 4096u));
  app.add_option("--max-body", opt->max_body, "largest request body in bytes (default 1 MiB); more gets 413");
  add_connection_options(app, opt);
  app.add_option("--grammar-memory", opt->grammar_memory,
                 "memory per slot for response_format / tools grammars (default 8M; 0: refuse them)");
  app.add_option("--grammar-compile-ms", opt->grammar_compile_ms,
                 "milliseconds a request's grammar may take to compile (default 1000; 0: no limit); longer is "
                 "stopped with a 400 grammar_compile_timeout")
      ->check(CLI::Range(0u, 3600000u));
}

GateLimits gate_limits(const ServerOptions& opt) {
  GateLimits l;
  l.max_connections = opt.max_connections;
  // A quarter: one address (a script gone wrong, a slowloris) can hold at most a quarter of the
  // table, so it takes four addresses to fill it, while a browser (6 per host) or a client
  // pool of dozens is never near the cap.
  l.max_connections_per_client = opt.max_connections_per_client > 0
                                     ? std::min(opt.max_connections_per_client, opt.max_connections)
                                     : std::max<size_t>(1, opt.max_connections / 4);
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
  const rlim_t need =
      static_cast<rlim_t>(opt->max_connections) + GateLimits().max_lingering + GateLimits().health_reserve + reserve;
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= need) return;
  rlimit raised = r;
  raised.rlim_cur = std::min(need, r.rlim_max);
  if (setrlimit(RLIMIT_NOFILE, &raised) == 0) r = raised;
  if (r.rlim_cur >= need) return;
  const rlim_t others = GateLimits().max_lingering + GateLimits().health_reserve + reserve;
  const size_t fits = r.rlim_cur > others ? static_cast<size_t>(r.rlim_cur - others) : 1;
  std::fprintf(stderr, "tern-server: --max-connections %zu lowered to %zu (the open-file limit is %llu)\n",
               opt->max_connections, fits, static_cast<unsigned long long>(r.rlim_cur));
  opt->max_connections = fits;
}

bool resolve_api_key(ServerOptions* opt) {
  const char* env = std::getenv("TERN_API_KEY");
  const int given = !opt->api_key.empty() + !opt->api_key_file.empty() + (env != nullptr && env[0] != '\0');
  if (given > 1) {
    std::fprintf(stderr, "tern-server: give the API key one way: --api-key, --api-key-file or TERN_API_KEY\n");
    return false;
  }
  if (env != nullptr && env[0] != '\0') opt->api_key = env;
  if (opt->api_key_file.empty()) return true;
  const char* path = opt->api_key_file.c_str();
  // O_NONBLOCK: a FIFO must not hang the start; fstat then refuses anything but a regular file.
  const int fd = ::open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    std::fprintf(stderr, "tern-server: cannot read --api-key-file %s: %s\n", path, std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return false;
  }
  const char* refusal = !S_ISREG(st.st_mode)          ? "it is not a regular file"
                        : (st.st_mode & S_IRWXO) != 0 ? "other users may read or write it (chmod o-rwx)"
                                                      : nullptr;
  if (refusal != nullptr) {
    std::fprintf(stderr, "tern-server: refusing --api-key-file %s: %s\n", path, refusal);
    ::close(fd);
    return false;
  }
  if ((st.st_mode & (S_IRGRP | S_IWGRP)) != 0) {
    std::fprintf(stderr, "tern-server: warning: --api-key-file %s is readable by its group\n", path);
  }
  std::string text;
  char chunk[4096];
  ssize_t n;
  while (text.size() < 65536 && (n = ::read(fd, chunk, sizeof chunk)) > 0) text.append(chunk, static_cast<size_t>(n));
  ::close(fd);
  text = text.substr(0, text.find('\n'));
  if (!text.empty() && text.back() == '\r') text.pop_back();
  if (text.empty()) {
    std::fprintf(stderr, "tern-server: --api-key-file %s: the first line is empty\n", path);
    return false;
  }
  opt->api_key = text;
  return true;
}

void warn_if_open_to_the_network(const ServerOptions& opt) {
  const bool loopback = opt.host == "localhost" || opt.host == "::1" || opt.host.rfind("127.", 0) == 0;
  if (loopback || !opt.api_key.empty()) return;
  std::fprintf(stderr,
               "tern-server: warning: listening on %s without an API key: anyone who can reach this address can use "
               "the model (and its CPU and memory); set --api-key-file or TERN_API_KEY, or keep the default 127.0.0.1 "
               "behind a proxy\n",
               opt.host.c_str());
}

}  // namespace tern::server
