// One thread that stops grammar compiles (tern_session_set_grammar) running past the
// server's deadline (--grammar-compile-ms), or whose client has left, by requesting the abort
// of the compiling session: the compile then returns TERN_ABORTED. The thread sleeps until the
// nearest deadline; while a watched compile has a client to check, it wakes every 50 ms.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "include/tern.h"

namespace tern::server {

class CompileWatchdog {
 public:
  enum class Outcome { Running, TimedOut, ClientGone };

  explicit CompileWatchdog(std::chrono::milliseconds check = std::chrono::milliseconds(50));
  ~CompileWatchdog();
  CompileWatchdog(const CompileWatchdog&) = delete;
  CompileWatchdog& operator=(const CompileWatchdog&) = delete;

  // Watches a compile about to start on `session`: its abort is requested `limit` from now
  // (0: no limit) or once `gone` (may be empty) says the client has left. Returns the watch.
  uint64_t watch(tern_session* session, std::chrono::milliseconds limit, std::function<bool()> gone);
  // The compile has returned: no abort is requested for it after this. What the watchdog did.
  Outcome unwatch(uint64_t id);

 private:
  struct Watch {
    uint64_t id;
    tern_session* session;
    bool timed;
    std::chrono::steady_clock::time_point deadline;
    std::function<bool()> gone;
    Outcome outcome;
  };
  void run();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Watch> watches_;
  uint64_t next_id_ = 1;
  bool stop_ = false;
  std::chrono::milliseconds check_;
  std::thread thread_;  // last: starts once the rest is ready
};

}  // namespace tern::server
