// The forward pass of every family over a batch of consecutive positions. Internal to the
// runtime: Session owns the scratch and the KV cache and calls forward().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "platform/error.h"
#include "runtime/base/arena.h"
#include "runtime/base/rope.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/model/model_config.h"

namespace tern {

class Model;

// Activations for up to `batch` tokens and the attention scores of one KV cache.
struct ForwardScratch {
  const AttentionObserver* observer = nullptr;  // usually null
  uint32_t batch = 0;
  size_t scores_per_head = 0;  // floats of `scores` per KV head (KvCache::attention_scores_per_head)
  // After eviction, score the sink tokens with the query at its position within the
  // cache (StreamingLLM). Off only to measure what that fixes (TERN_KV_NO_SINK_REPOSITION).
  bool reposition_sinks = true;
  float* x = nullptr;         // [batch][hidden] residual stream
  float* xn = nullptr;        // [batch][wide] normalized input of a matmul
  int8_t* xq = nullptr;       // [batch][wide] its int8 codes
  float* xq_scale = nullptr;  // [batch]
  int32_t* xq_sum = nullptr;  // [batch]
  float* q = nullptr;         // [batch][heads*head_dim]
  float* k = nullptr;         // [batch][kv_heads*head_dim]
  float* v = nullptr;
  float* att = nullptr;       // [batch][heads*head_dim]
  float* gate = nullptr;      // [batch][ffn]
  float* up = nullptr;        // [batch][ffn]
  float* proj = nullptr;      // [batch][hidden] o_proj / down output
  float* rope_cos = nullptr;  // [batch][head_dim/2]
  float* rope_sin = nullptr;
  float* scores = nullptr;    // [kv_heads][scores_per_head]
  float* q_sinks = nullptr;   // [batch][heads*head_dim] queries re-positioned for the sinks
  float* sink_cos = nullptr;  // [head_dim/2] rotation by -evicted positions
  float* sink_sin = nullptr;
  float* logits = nullptr;    // [vocab]
  void* head_work = nullptr;  // the lm_head's quantized activations for up to `batch` rows (dense_gemv_i8_tokens)
  // The embedding families (projection norms, sliding windows) and packed texts.
  float* xh = nullptr;              // [batch][hidden] attn_norm / ffn_norm output the projection norms read
  float* xh_inv_rms = nullptr;      // [batch] 1 / rms of its rows
  float* rope_local_cos = nullptr;  // [batch][head_dim/2] angles at the sliding layers' RoPE base
  float* rope_local_sin = nullptr;
  uint32_t* attend_from = nullptr;  // [batch] first position each token attends to in this layer
  // Set by the caller for a batch holding several texts: per token, the cache position its
  // text starts at (its RoPE position is counted from there and it attends only from there
  // on). Null: one sequence from position 0. Needs a dense KV cache.
  const uint32_t* segment_start = nullptr;
};

// Either measures (arena == nullptr: adds each buffer's padded size to *bytes) or carves
// the buffers from the arena. The two always agree because they run the same code.
// scores_per_head: what the session's KV cache needs (kv_cache_scores_per_head).
Error carve_forward_scratch(const ModelConfig& config, uint32_t batch, size_t scores_per_head, ArenaAllocator* arena,
                            ForwardScratch* scratch, size_t* bytes);

// One session's tokens in a forward pass that may run several sessions' tokens together
// (forward_sequences): its KV cache, its own scratch (whose attention scores it uses and
// whose logits it gets) and its abort flag. Its rows are the pass's rows from `row`.
struct ForwardSequence {
  KvCache* kv = nullptr;
  ForwardScratch* own = nullptr;
  const int32_t* tokens = nullptr;
  uint32_t n = 0;
  uint32_t pos0 = 0;
  bool want_logits = false;     // the last row's logits into own->logits
  float* row_logits = nullptr;  // else, when set: every row's logits, [n][vocab] (verification)
  const std::atomic<int>* abort = nullptr;
  Error status = Error::Ok;  // out: this sequence's result
  char message[256] = {};    // out: its error's message (the pass may run on another thread)
  uint32_t row = 0;          // out: its first row in `shared`
  // ForwardQueue's bookkeeping while the sequence waits to run.
  ForwardSequence* next_queued = nullptr;
  uint32_t rows_done = 0;
  size_t* ticket = nullptr;  // its run() call's count of sequences still to run
};

// Runs every sequence's tokens (positions pos0..pos0+n-1 of its cache) in one pass through
// the layers: each weight matrix is read once for all of them, and each sequence attends
// only through its own cache. Its rows get exactly the values forward() would give it alone.
// `shared` holds the rows (Σ n <= shared.batch, else InvalidArgument for the whole pass); a
// sequence that is invalid or fails (a full cache, a bad token, its abort flag) gets its
// error in `status` and the others go on. Packed texts (segment_start) and attention
// observers take one sequence whose `own` is `shared`.
Error forward_sequences(const Model& model, ForwardScratch& shared, ForwardSequence* sequences, size_t count);

// Runs tokens[0..n) at positions pos0..pos0+n-1 (n <= scratch.batch), writing their
// keys/values into `kv` and attending through it, one call per layer; logits of the last
// token go to scratch.logits when want_logits. Without eviction pos0 + n must be within the
// cache's capacity; with it, positions grow without bound (the oldest middle blocks are
// dropped; the batch's earlier tokens then see the cache as it is after the whole batch
// was written). Aborted if *abort becomes nonzero (checked per layer). forward_sequences
// with one sequence.
Error forward(const Model& model, KvCache& kv, ForwardScratch& scratch, const int32_t* tokens, uint32_t n,
              uint32_t pos0, bool want_logits, const std::atomic<int>* abort);

// Building blocks, exposed for tests against naive references.
void rms_norm(const float* x, const float* weight, size_t n, float eps, float* out);
// bitllama2c's parameter-free norm inside every ternary linear: a / (rms(a) * n).
void bitllama_norm(const float* x, size_t n, float* out);
// RoPE: runtime/rope.h.

}  // namespace tern
