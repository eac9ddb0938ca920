// The forward pass of every family over a batch of consecutive positions. Internal to the
// runtime: Session owns the scratch and the KV cache and calls forward().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "platform/error.h"
#include "runtime/arena.h"
#include "runtime/kv_cache.h"
#include "runtime/model_config.h"

namespace tern {

class Model;

// Lets host tools (calibration, quality evaluation) see inside attention without a second
// implementation of the forward pass. Callbacks run on the calling thread (attention runs
// serially while an observer is set) and must not call back into the session.
struct AttentionObserver {
  // Normalized attention of one query head at position `pos` over positions [0, len)
  // (dense caches only).
  void (*on_probs)(void* user, uint32_t layer, uint32_t query_head, uint32_t pos, const float* probs,
                   uint32_t len) = nullptr;
  // Attention outputs of the n tokens at pos0.. (before attn_sub_norm): [n][heads*head_dim].
  void (*on_output)(void* user, uint32_t layer, uint32_t pos0, uint32_t n, const float* att) = nullptr;
  void* user = nullptr;
};

// How attention reads the cache, which decides the scratch it needs.
enum class AttentionScratch : uint32_t {
  // Rows read back into kv_rows ([kv_heads][2][context][head_dim] floats) and scores for
  // every query head of a group: compressed caches read back (tests, tools).
  ReadBack = 0,
  // CompressedKvCache::attend() only: no rows, scores for min(group, 4) query heads per
  // KV head. `context` is then the cache's resident capacity, not the session's length.
  AttendOnly = 1,
  // Dense caches (f32, f16): attention reads the cache's keys and values in place
  // (KvCache::key_blocks / value_rows and their _f16), so no kv_rows; scores for every
  // query head of a group.
  InPlace = 2,
};

// Activations for up to `batch` tokens and attention over up to `context` positions.
struct ForwardScratch {
  const AttentionObserver* observer = nullptr;  // usually null
  uint32_t batch = 0;
  uint32_t context = 0;
  AttentionScratch kind = AttentionScratch::ReadBack;
  size_t scores_per_head = 0;  // floats of `scores` per KV head
  // Compressed caches: read rows back through KvCache instead of attend() (tests, tools;
  // needs kind == ReadBack and no eviction). Also taken when an on_probs observer is set.
  bool read_back = false;
  // After eviction, score the sink tokens with the query at its position within the
  // cache (StreamingLLM). Off only to measure what that fixes (TERN_KV_NO_SINK_REPOSITION).
  bool reposition_sinks = true;
  float* x = nullptr;        // [batch][hidden] residual stream
  float* xn = nullptr;       // [batch][wide] normalized input of a matmul
  int8_t* xq = nullptr;      // [batch][wide] its int8 codes
  float* xq_scale = nullptr; // [batch]
  int32_t* xq_sum = nullptr; // [batch]
  float* q = nullptr;        // [batch][heads*head_dim]
  float* k = nullptr;        // [batch][kv_heads*head_dim]
  float* v = nullptr;
  float* att = nullptr;      // [batch][heads*head_dim]
  float* gate = nullptr;     // [batch][ffn]
  float* up = nullptr;       // [batch][ffn]
  float* proj = nullptr;     // [batch][hidden] o_proj / down output
  float* rope_cos = nullptr; // [batch][head_dim/2]
  float* rope_sin = nullptr;
  float* kv_rows = nullptr;  // [kv_heads][2][context][head_dim] keys and values read back (ReadBack)
  float* scores = nullptr;   // [kv_heads][scores_per_head]
  float* q_sinks = nullptr;  // [batch][heads*head_dim] queries re-positioned for the sinks
  float* sink_cos = nullptr; // [head_dim/2] rotation by -evicted positions
  float* sink_sin = nullptr;
  float* logits = nullptr;   // [vocab]
};

// The scratch a dense cache needs: attention reads f32 and f16 storage in place.
inline AttentionScratch dense_attention_scratch(KvType) { return AttentionScratch::InPlace; }

// Either measures (arena == nullptr: adds each buffer's padded size to *bytes) or carves
// the buffers from the arena. The two always agree because they run the same code.
Error carve_forward_scratch(const ModelConfig& config, uint32_t batch, uint32_t context, ArenaAllocator* arena,
                            ForwardScratch* scratch, size_t* bytes);
Error carve_forward_scratch(const ModelConfig& config, uint32_t batch, uint32_t context, AttentionScratch kind,
                            ArenaAllocator* arena, ForwardScratch* scratch, size_t* bytes);

// Runs tokens[0..n) at positions pos0..pos0+n-1 (n <= scratch.batch), writing their
// keys/values into `kv`; logits of the last token go to scratch.logits when want_logits.
// Dense caches (and read-back) need pos0 + n <= context. A CompressedKvCache is attended
// with CompressedKvCache::attend() when the scratch allows (scores for min(group, 4) x its
// capacity per KV head); with eviction on, positions may exceed its capacity without bound
// (the oldest middle blocks are dropped; the batch's earlier tokens then see the cache as
// it is after the whole batch was written). Aborted if *abort becomes nonzero (per layer).
Error forward(const Model& model, KvCache& kv, ForwardScratch& scratch, const int32_t* tokens, uint32_t n,
              uint32_t pos0, bool want_logits, const std::atomic<int>* abort);

// Building blocks, exposed for tests against naive references.
void rms_norm(const float* x, const float* weight, size_t n, float eps, float* out);
// bitllama2c's parameter-free norm inside every ternary linear: a / (rms(a) * n).
void bitllama_norm(const float* x, size_t n, float* out);
// Rotates one head in place; cos/sin hold head_dim/2 entries for this position.
void rope_rotate_half(float* head, size_t head_dim, const float* cos, const float* sin);
void rope_adjacent_pairs(float* head, size_t head_dim, const float* cos, const float* sin);
void rope_angles(const float* inv_freq, size_t half, uint32_t pos, float* cos, float* sin);

}  // namespace tern
