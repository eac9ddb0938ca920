// tern-server MODEL.tern [--host 127.0.0.1] [--port 8080] [--memory-budget 1G|available[-P%]]
//             [--kv MODE] [--ctx N] [--sessions N] [--threads N] [--api-key-file FILE] [--timeout S]
//             [--queue N] [--max-body BYTES] [--max-connections N] [--header-timeout S]
//             [--max-connections-per-client N] [--body-timeout S] [--idle-timeout S] [--write-timeout S]
//             [--grammar-memory 8M] [--grammar-compile-ms 1000] [--alias NAME] [--cors-origin ORIGIN]...
// (the API key also as --api-key KEY, or in the environment as TERN_API_KEY)
// An OpenAI-compatible HTTP server over the C API: /v1/chat/completions, /v1/completions
// (both with streaming), /v1/embeddings (embedding bundles), /v1/models, /health, /tokenize,
// /detokenize (routes.h). Each of --sessions slots is a session of the one loaded model
// (model_loader.h); requests beyond the free slots wait in a bounded queue, and past it get
// 503 with Retry-After. A request whose prompt starts with what its slot already holds skips
// re-running that prefix (generation.h). Connections are read by a gate (connection_gate.h):
// a request reaches a worker only when it has arrived whole.
#include <httplib.h>
#include <CLI/CLI.hpp>

#include <pthread.h>
#include <signal.h>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <thread>

#include "tools/server/connection_gate.h"
#include "tools/server/model_loader.h"
#include "tools/server/process_memory.h"
#include "tools/server/routes.h"
#include "tools/server/server_options.h"
#include "tools/server/server_state.h"
#include "tools/server/slot_pool.h"

using namespace tern::server;

namespace {

std::atomic<bool> g_listen_returned{false};

// stop() before listen has started is lost: wait for it to run first.
void stop_server(httplib::Server& http) {
  while (!http.is_running() && !g_listen_returned) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  http.stop();
}

// SIGINT and SIGTERM (and SIGUSR1, which ends the stopper) blocked in this thread and so in
// every thread it starts: they arrive at the stopper's sigwait.
sigset_t block_stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// Binds (--port 0: any free port), then says where on stderr and the port alone on stdout
// (for a script that asked for any port); false when it cannot listen.
bool bind_and_announce(GatedServer& http, const ServerState& s) {
  const ServerOptions& opt = s.opt;
  const int port =
      opt.port == 0 ? http.bind_to_any_port(opt.host) : (http.bind_to_port(opt.host, opt.port) ? opt.port : -1);
  if (port < 0) {
    std::fprintf(stderr, "tern-server: cannot listen on %s:%d\n", opt.host.c_str(), opt.port);
    return false;
  }
  http.widen_backlog(SOMAXCONN);
  std::fprintf(stderr, "tern-server: listening on http://%s:%d (model %s, %u session slot%s)\n", opt.host.c_str(), port,
               s.model_name.c_str(), opt.sessions, opt.sessions == 1 ? "" : "s");
  std::printf("%d\n", port);
  std::fflush(stdout);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  configure_allocator();  // before any thread: requests' memory goes back (process_memory.h)
  CLI::App app{"tern-server: an OpenAI-compatible local server for a Tern bundle"};
  ServerState s;
  add_server_options(app, &s.opt);
  CLI11_PARSE(app, argc, argv);
  if (!resolve_api_key(&s.opt)) return 2;
  fit_open_file_limit(&s.opt);
  warn_if_open_to_the_network(s.opt);
  s.model_name = s.opt.alias.empty() ? model_name_of(s.opt.bundle) : s.opt.alias;
  s.created = static_cast<int64_t>(std::time(nullptr));
  s.pool = std::make_unique<SlotPool>(s.opt.sessions, s.opt.queue);
  const sigset_t signals = block_stop_signals();
  s.watchdog = std::make_unique<CompileWatchdog>();  // its thread with the stop signals blocked

  GatedServer http;
  const GateLimits limits = gate_limits(s.opt);
  ConnectionGate gate(limits, gate_hooks(http, s));
  http.attach(&gate);
  http.set_payload_max_length(s.opt.max_body);
  // The Keep-Alive header tells clients what the gate does.
  http.set_keep_alive_timeout(static_cast<time_t>(std::ceil(s.opt.idle_timeout)));
  http.set_keep_alive_max_count(limits.max_requests_per_connection);
  add_routes(http, s, gate);
  if (!bind_and_announce(http, s)) return 1;

  // Load while already answering /health ("loading"); a model that cannot load stops the server.
  std::thread loader([&s, &http] { load_model(s, [&http] { stop_server(http); }); });
  // SIGINT / SIGTERM stop the server from a thread of its own (stop() is not for signal
  // handlers); every other thread has the two blocked, so they arrive here.
  std::thread stopper([&http, signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig != SIGUSR1) std::fprintf(stderr, "tern-server: %s, stopping\n", strsignal(sig));
    if (sig != SIGUSR1) stop_server(http);
  });
  http.listen_after_bind();
  g_listen_returned = true;
  gate.stop();                                     // running requests end first: the sessions below are still theirs
  pthread_kill(stopper.native_handle(), SIGUSR1);  // ends the stopper if no signal came
  stopper.join();
  loader.join();
  free_model(s);
  return s.failed ? 1 : 0;
}
