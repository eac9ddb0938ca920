// Sessions of one model decoded together: forward passes that sessions ask for at the same
// time (server slots, an app's threads, tern_decode_batch) are merged into one pass, so each
// weight matrix is read once per step for all of them (forward_sequences). Every sequence's
// rows get exactly the values a pass of its own would give, so merging changes no output,
// only the time (an evicting cache's prompt past its capacity excepted: the size of its
// pieces decides which old positions are dropped). Nothing is allocated: requests live on their callers' stacks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "runtime/engine/forward.h"

namespace tern {

class Model;

class ForwardQueue {
 public:
  // Rows a prompt's prefill adds to a pass that also decodes other sessions' tokens: a long
  // prompt joins in pieces, so running streams slow down while it is read but never stop.
  static constexpr uint32_t kPrefillRowsBesideDecoding = 8;
  // A sequence of at most this many rows counts as decoding (a token and its drafts).
  static constexpr uint32_t kDecodeRows = 9;

  explicit ForwardQueue(const Model& model) : model_(model) {}

  // Runs sequences[0..count) (distinct sessions' KV caches; their `own` scratches are theirs
  // alone while this runs), merged with whatever other threads ask for meanwhile, in as many
  // passes as the rows need; returns when all of them have run. Each sequence's `status`
  // (and `message`) says how it went. Sequences longer than a pass's rows run in pieces at
  // consecutive positions; want_logits applies to the last piece (row_logits to each).
  void run(ForwardSequence* sequences, size_t count);

  // Passes run and rows in them since load (benchmarks and tests see the merging).
  uint64_t passes() const;
  uint64_t rows() const;

 private:
  // One pass over what is queued: called by the leader with the lock held (released while
  // the pass runs).
  void run_pass(std::unique_lock<std::mutex>& lock, ForwardScratch& shared);
  // Waits (briefly) for the sessions of the last pass to queue their next step.
  void gather(std::unique_lock<std::mutex>& lock);

  const Model& model_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  ForwardSequence* head_ = nullptr;  // queued sequences, oldest first
  ForwardSequence* tail_ = nullptr;
  size_t queued_ = 0;
  bool leading_ = false;            // a thread is running passes
  size_t last_pass_sequences_ = 0;  // sequences that finished in the last pass (expected back)
  std::chrono::steady_clock::duration last_pass_time_{};
  uint64_t passes_ = 0;
  uint64_t rows_ = 0;
};

}  // namespace tern
