// Session slots for concurrent requests: a request takes a free slot, or waits in a bounded
// queue for one; past the queue (or after waiting too long) it is turned away (503). Each slot
// remembers the grammar its session holds compiled, and a request takes, among the free slots,
// one holding its grammar (no compile), else one holding none (no compiled grammar lost); among
// those, the one whose conversation shares the longest prefix with the request's prompt (the
// library then prefills only the rest).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "tools/server/grammar_cache.h"

namespace tern::server {

class SlotPool {
 public:
  SlotPool(size_t slots, size_t queue_limit) : busy_(slots, false), grammar_(slots), queue_limit_(queue_limit) {}

  enum class Refusal { None, QueueFull, TimedOut, ClientGone };
  // A free slot, waiting up to `wait` in line (first come, first served); nullopt and why not.
  // While in line, `gone` is asked every `check` whether the client has left: then the place
  // is given up at once (ClientGone), so it no longer turns live clients away. `grammar`: the
  // request's (empty: none), and `shared_prefix(slot)`: how many of its prompt's tokens a free
  // slot holds (null: none), for the choice among free slots.
  using SharedPrefix = std::function<size_t(size_t slot)>;
  std::optional<size_t> acquire(std::chrono::milliseconds wait, Refusal* why,
                                const std::function<bool()>& gone = nullptr,
                                std::chrono::milliseconds check = std::chrono::milliseconds(50),
                                GrammarKey grammar = {}, const SharedPrefix& shared_prefix = nullptr) {
    std::unique_lock<std::mutex> lock(mutex_);
    *why = Refusal::None;
    if (line_.empty()) {
      if (auto slot = take_free(grammar, shared_prefix)) return slot;
    }
    if (line_.size() >= queue_limit_) {
      *why = Refusal::QueueFull;
      return std::nullopt;
    }
    const uint64_t ticket = next_ticket_++;
    line_.push_back(ticket);
    const auto deadline = std::chrono::steady_clock::now() + wait;
    std::optional<size_t> slot;
    while (!slot) {
      if (line_.front() == ticket) slot = take_free(grammar, shared_prefix);
      if (slot) break;
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        *why = Refusal::TimedOut;
        break;
      }
      if (gone) {
        cv_.wait_until(lock, std::min(deadline, now + check));
        if (line_.front() == ticket) slot = take_free(grammar, shared_prefix);
        if (slot) break;
        lock.unlock();
        const bool left = gone();  // a system call: not under the lock
        lock.lock();
        if (left) {
          *why = Refusal::ClientGone;
          break;
        }
      } else {
        cv_.wait_until(lock, deadline);
      }
    }
    for (auto it = line_.begin(); it != line_.end(); ++it) {
      if (*it == ticket) {
        line_.erase(it);
        break;
      }
    }
    cv_.notify_all();  // the next in line may take a slot now
    return slot;
  }

  void release(size_t slot) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      busy_[slot] = false;
    }
    cv_.notify_all();
  }

  // The grammar a slot's session now holds compiled (set by the slot's holder).
  GrammarKey grammar(size_t slot) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return grammar_[slot];
  }
  void set_grammar(size_t slot, GrammarKey key) {
    std::lock_guard<std::mutex> lock(mutex_);
    grammar_[slot] = key;
  }

  size_t total() const { return busy_.size(); }
  size_t idle() const {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t n = 0;
    for (bool b : busy_) n += !b;
    return n;
  }
  size_t waiting() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return line_.size();
  }

 private:
  // A free slot: by the grammar it holds (the request's, then none, then any other), then by
  // the prompt tokens it holds, then the lowest index.
  std::optional<size_t> take_free(GrammarKey grammar, const SharedPrefix& shared_prefix) {
    std::optional<size_t> best;
    int best_rank = 0;
    size_t best_prefix = 0;
    for (size_t i = 0; i < busy_.size(); ++i) {
      if (busy_[i]) continue;
      const int rank = grammar_[i] == grammar ? 2 : grammar_[i].size == 0 ? 1 : 0;
      const size_t prefix = shared_prefix ? shared_prefix(i) : 0;
      if (!best || rank > best_rank || (rank == best_rank && prefix > best_prefix)) {
        best = i;
        best_rank = rank;
        best_prefix = prefix;
      }
    }
    if (best) busy_[*best] = true;
    return best;
  }

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<bool> busy_;
  std::vector<GrammarKey> grammar_;  // what each slot's session holds compiled
  std::deque<uint64_t> line_;
  uint64_t next_ticket_ = 0;
  size_t queue_limit_;
};

}  // namespace tern::server
