// What every part of tern-server shares: its options, the loaded model and its session slots,
// whether loading has finished (or failed), the grammar-compile watchdog and counts, and the
// lock its log lines take.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "include/tern.h"
#include "tools/server/compile_watchdog.h"
#include "tools/server/server_options.h"
#include "tools/server/slot_pool.h"

namespace tern::server {

// What became of the grammars requests set on their slots (/health).
struct GrammarCounts {
  std::atomic<uint64_t> compiled{0};    // compiled into a slot
  std::atomic<uint64_t> reused{0};      // the slot held it compiled already
  std::atomic<uint64_t> timed_out{0};   // stopped at --grammar-compile-ms
  std::atomic<uint64_t> too_large{0};   // more than --grammar-memory
  std::atomic<uint64_t> compile_us{0};  // time in compiles that finished
};

struct ServerState {
  ServerOptions opt;
  std::string model_name;  // --alias, or the bundle's file name without .tern
  int64_t created = 0;
  tern_model* model = nullptr;
  std::vector<tern_session*> sessions;  // one per slot of `pool`
  std::unique_ptr<SlotPool> pool;
  tern_model_info info{};
  tern_embedding_info embedding{};  // dimensions > 0: an embedding model
  bool evicting = false;
  std::unique_ptr<CompileWatchdog> watchdog;  // started by main once stop signals are blocked
  GrammarCounts grammar;
  // The model loads while /health already answers: until `ready`, every other endpoint
  // answers 503 ("loading", or `load_error` once `failed`).
  std::atomic<bool> ready{false};
  std::atomic<bool> failed{false};
  std::string load_error;
  std::mutex log_mutex;
};

}  // namespace tern::server
