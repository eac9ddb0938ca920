// The grammar-compile watchdog (compile_watchdog.h).
#include "tools/server/compile_watchdog.h"

#include <algorithm>
#include <utility>

namespace tern::server {

CompileWatchdog::CompileWatchdog(std::chrono::milliseconds check) : check_(check), thread_([this] { run(); }) {}

CompileWatchdog::~CompileWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t CompileWatchdog::watch(tern_session* session, std::chrono::milliseconds limit, std::function<bool()> gone) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t id = next_id_++;
  watches_.push_back(Watch{id, session, limit.count() > 0, std::chrono::steady_clock::now() + limit, std::move(gone),
                           Outcome::Running});
  cv_.notify_all();  // the thread's next wake-up may be sooner now
  return id;
}

CompileWatchdog::Outcome CompileWatchdog::unwatch(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = watches_.begin(); it != watches_.end(); ++it) {
    if (it->id == id) {
      const Outcome outcome = it->outcome;
      watches_.erase(it);
      return outcome;
    }
  }
  return Outcome::Running;
}

void CompileWatchdog::run() {
  using clock = std::chrono::steady_clock;
  std::unique_lock<std::mutex> lock(mutex_);
  clock::time_point next_check = clock::now();
  while (!stop_) {
    const clock::time_point now = clock::now();
    const bool check_clients = now >= next_check;
    if (check_clients) next_check = now + check_;
    clock::time_point wake = clock::time_point::max();
    // Under the lock: unwatch() waits, so no abort is requested, and no client socket asked,
    // once a compile has returned.
    for (Watch& w : watches_) {
      if (w.outcome != Outcome::Running) continue;
      if (w.timed && now >= w.deadline) {
        w.outcome = Outcome::TimedOut;
      } else if (w.gone && check_clients && w.gone()) {
        w.outcome = Outcome::ClientGone;
      }
      if (w.outcome != Outcome::Running) {
        tern_session_request_abort(w.session);
        continue;
      }
      if (w.timed) wake = std::min(wake, w.deadline);
      if (w.gone) wake = std::min(wake, next_check);
    }
    if (wake == clock::time_point::max()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, wake);
    }
  }
}

}  // namespace tern::server
