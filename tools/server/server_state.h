// What every part of tern-server shares: its options, the loaded model and its session slots,
// whether loading has finished (or failed), and the lock its log lines take.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "include/tern.h"
#include "tools/server/server_options.h"
#include "tools/server/slot_pool.h"

namespace tern::server {

struct ServerState {
  ServerOptions opt;
  std::string model_name;  // the bundle's file name without .tern
  int64_t created = 0;
  tern_model* model = nullptr;
  std::vector<tern_session*> sessions;  // one per slot of `pool`
  std::unique_ptr<SlotPool> pool;
  tern_model_info info{};
  tern_embedding_info embedding{};  // dimensions > 0: an embedding model
  bool evicting = false;
  // The model loads while /health already answers: until `ready`, every other endpoint
  // answers 503 ("loading", or `load_error` once `failed`).
  std::atomic<bool> ready{false};
  std::atomic<bool> failed{false};
  std::string load_error;
  std::mutex log_mutex;
};

}  // namespace tern::server
