#include "runtime/engine/forward_queue.h"

#include <algorithm>
#include <cstdio>

#include "runtime/engine/model.h"

namespace tern {

namespace {

// Sequences in one pass, at most: their pieces are copied to the leader's stack.
constexpr size_t kMaxPassSequences = 32;
// How long a pass waits for the sessions of the last one to queue their next step: they
// sample and come back within a millisecond or so, and a pass without them would read
// every weight again for fewer rows. A session that has finished costs one such wait.
constexpr auto kMaxGather = std::chrono::milliseconds(3);

uint32_t remaining(const ForwardSequence& q) { return q.n - q.rows_done; }

}  // namespace

void ForwardQueue::run(ForwardSequence* sequences, size_t count) {
  if (count == 0) return;
  size_t left = count;
  std::unique_lock<std::mutex> lock(mutex_);
  for (size_t i = 0; i < count; ++i) {
    ForwardSequence& q = sequences[i];
    q.status = Error::Ok;
    q.message[0] = '\0';
    q.rows_done = 0;
    q.ticket = &left;
    q.next_queued = nullptr;
    (tail_ != nullptr ? tail_->next_queued : head_) = &q;
    tail_ = &q;
    ++queued_;
  }
  changed_.notify_all();  // a leader gathering for this step
  while (left > 0) {
    if (!leading_) {
      // Lead: run passes (with everyone's queued rows) until this call's sequences are done.
      // The first sequence's scratch holds the pass: its session belongs to this caller.
      leading_ = true;
      while (left > 0) {
        gather(lock);
        run_pass(lock, *sequences[0].own);
      }
      leading_ = false;
      changed_.notify_all();  // a waiter with rows still queued leads next
      return;
    }
    changed_.wait(lock);
  }
}

void ForwardQueue::gather(std::unique_lock<std::mutex>& lock) {
  if (queued_ >= last_pass_sequences_) return;
  auto wait = last_pass_time_ / 4;
  if (wait > kMaxGather) wait = kMaxGather;
  changed_.wait_for(lock, wait, [this] { return queued_ >= last_pass_sequences_; });
}

void ForwardQueue::run_pass(std::unique_lock<std::mutex>& lock, ForwardScratch& shared) {
  // Decoding sequences first (oldest first), then prompts: a prompt beside them adds a piece
  // of kPrefillRowsBesideDecoding rows, alone as many rows as the scratch holds.
  ForwardSequence batch[kMaxPassSequences];
  ForwardSequence* origin[kMaxPassSequences];
  size_t count = 0;
  uint32_t rows = 0;
  bool decoding = false;
  const size_t vocab = model_.config().vocab;
  for (ForwardSequence* q = head_; q != nullptr; q = q->next_queued) decoding |= remaining(*q) <= kDecodeRows;
  auto take = [&](ForwardSequence& q, uint32_t n) {
    ForwardSequence& piece = batch[count];
    origin[count++] = &q;
    piece.kv = q.kv;
    piece.own = q.own;
    piece.tokens = q.tokens + q.rows_done;
    piece.n = n;
    piece.pos0 = q.pos0 + q.rows_done;
    piece.want_logits = q.want_logits && q.rows_done + n == q.n;
    piece.row_logits = q.row_logits != nullptr ? q.row_logits + static_cast<size_t>(q.rows_done) * vocab : nullptr;
    piece.abort = q.abort;
    rows += n;
  };
  for (ForwardSequence* q = head_; q != nullptr && count < kMaxPassSequences; q = q->next_queued) {
    if (remaining(*q) <= kDecodeRows && rows + remaining(*q) <= shared.batch) take(*q, remaining(*q));
  }
  const size_t decoders = count;
  auto taken = [&](const ForwardSequence* q) { return std::find(origin, origin + decoders, q) != origin + decoders; };
  // The rest (prompts, and steps that did not fit whole) in pieces.
  for (ForwardSequence* q = head_; q != nullptr && count < kMaxPassSequences && rows < shared.batch;
       q = q->next_queued) {
    if (taken(q)) continue;
    uint32_t n = remaining(*q);
    const uint32_t cap = decoding ? kPrefillRowsBesideDecoding : shared.batch - rows;
    if (n > cap) n = cap;
    if (n > shared.batch - rows) n = shared.batch - rows;
    if (n > 0) take(*q, n);
  }

  lock.unlock();
  const auto t0 = std::chrono::steady_clock::now();
  const Error e = forward_sequences(model_, shared, batch, count);
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  lock.lock();

  passes_ += 1;
  rows_ += rows;
  last_pass_time_ = elapsed;
  last_pass_sequences_ = count;
  for (size_t i = 0; i < count; ++i) {
    ForwardSequence& q = *origin[i];
    const ForwardSequence& r = batch[i];
    bool finished = true;
    if (e != Error::Ok) {
      q.status = e;
      std::snprintf(q.message, sizeof q.message, "%s", last_error_message());
    } else if (r.status != Error::Ok) {
      q.status = r.status;
      std::snprintf(q.message, sizeof q.message, "%s", r.message);
    } else {
      q.rows_done += r.n;
      finished = q.rows_done == q.n;
    }
    if (!finished) continue;
    // Unlink q (it is queued: only this leader removes entries).
    ForwardSequence* prev = nullptr;
    for (ForwardSequence* it = head_; it != &q; it = it->next_queued) prev = it;
    (prev != nullptr ? prev->next_queued : head_) = q.next_queued;
    if (tail_ == &q) tail_ = prev;
    q.next_queued = nullptr;
    --queued_;
    --*q.ticket;
  }
  changed_.notify_all();
}

uint64_t ForwardQueue::passes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return passes_;
}

uint64_t ForwardQueue::rows() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return rows_;
}

}  // namespace tern
