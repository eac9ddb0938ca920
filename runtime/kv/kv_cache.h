// The KV cache behind one interface. The forward pass writes each new token's keys and
// values per (layer, kv head), then asks the cache to attend for the layer: one call, dense
// and compressed alike. Each kind attends over its own storage in place with its own
// kernels (the dense cache: kernels/dense_attention.h over f32 or f16 rows; the compressed
// per-head cache: kernels/kv_attention.h over quantized blocks), so the forward pass never
// knows which kind it has. Which kind a session gets is decided once, from the KV mode, by
// runtime/kv/kv_cache_spec.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/error.h"
#include "platform/thread_pool.h"
#include "runtime/base/arena.h"
#include "runtime/base/rope.h"
#include "runtime/model/model_config.h"

namespace tern {

class CompressedKvCache;

// Ids appear in the C API: append, never renumber.
enum class KvType : uint32_t {
  F16 = 0,
  F32 = 1,
};
const char* to_string(KvType type);

struct KvShape {
  uint32_t layers = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
};
inline KvShape kv_shape_of(const ModelConfig& c) { return KvShape{c.layers, c.kv_heads, c.head_dim}; }

// Lets host tools (calibration, quality evaluation) see inside attention without a second
// implementation of the forward pass. Callbacks run on the calling thread (attention runs
// serially while an observer is set) and must not call back into the session.
struct AttentionObserver {
  // Normalized attention of one query head at position `pos` over positions [0, len).
  // Reported by dense caches only (the compressed one never materializes the full row).
  void (*on_probs)(void* user, uint32_t layer, uint32_t query_head, uint32_t pos, const float* probs,
                   uint32_t len) = nullptr;
  // Attention outputs of the n tokens at pos0.. (before attn_sub_norm): [n][heads*head_dim].
  void (*on_output)(void* user, uint32_t layer, uint32_t pos0, uint32_t n, const float* att) = nullptr;
  void* user = nullptr;
};

// One layer's attention for n new tokens at positions pos0..pos0+n-1 (already written).
struct KvAttention {
  const float* q = nullptr;        // [n][heads * head_dim], after RoPE; a GQA group's heads are adjacent
  const float* q_sinks = nullptr;  // the same rotated to score the sink tokens after eviction, or null
  float* out = nullptr;            // [n][heads * head_dim]
  uint32_t n = 0;
  uint32_t pos0 = 0;
  uint32_t heads = 0;          // query heads (a multiple of the cache's kv_heads)
  float scale = 1.0f;          // 1 / sqrt(head_dim)
  float* scores = nullptr;     // [kv_heads][scores_per_head] scratch
  size_t scores_per_head = 0;  // at least the cache's attention_scores_per_head(group)
  const AttentionObserver* observer = nullptr;
  // The model's RoPE, for caches that re-position queries themselves (heavy-hitter eviction:
  // heads hold different positions, runtime/kv/kv_policy.h); null: keep true distances.
  const Rope* rope = nullptr;
  // Per token, the first position it attends to (texts packed into one batch, sliding
  // windows); null: 0. Dense caches only (the forward pass refuses it with a compressed one).
  const uint32_t* first = nullptr;
};

class KvCache {
 public:
  virtual ~KvCache() = default;

  KvShape shape() const { return shape_; }
  // Positions the cache holds at once.
  uint32_t capacity_tokens() const { return capacity_; }
  // True when writes past the capacity drop old positions instead of failing.
  virtual bool evicting() const { return false; }

  // Stores the key and value rows (head_dim floats each) of `pos` for one (layer, kv head);
  // positions arrive in order. ContextFull past the capacity unless the cache evicts.
  virtual Error write(uint32_t layer, uint32_t kv_head, uint32_t pos, const float* key, const float* value) = 0;
  // Attention of every query head of `layer` over the kept positions < pos0 + t + 1 for
  // token t, into a.out. Runs the KV heads on `pool` (may be null) when it pays.
  void attend(uint32_t layer, const KvAttention& a, const ThreadPool* pool) const;
  // Floats of KvAttention::scores one KV head needs for `group` query heads.
  virtual size_t attention_scores_per_head(uint32_t group) const = 0;
  // Non-sink positions dropped so far when all heads drop alike: the forward pass scores the
  // sinks with the query at pos - evicted_positions() (runtime/kv/kv_policy.h). 0 when heads
  // differ (heavy-hitter eviction): then the cache re-positions with KvAttention::rope.
  virtual uint32_t evicted_positions(uint32_t layer) const { return 0; }
  // Forgets positions >= pos written by an unfinished forward pass (an abort or error mid
  // batch). InvalidState when that is no longer possible (then only reset() recovers).
  virtual Error rollback_to(uint32_t pos) = 0;
  // True when rollback_to(pos) would leave exactly the state a fresh cache has after
  // positions 0..pos-1 were written (nothing the later positions caused remains).
  virtual bool rollback_is_exact(uint32_t pos) const { return true; }
  // Positions that can be written next without changing how any earlier one is stored (no
  // block leaves the exact window, nothing is evicted). A batch that long attends as
  // token-by-token decoding would, and rolling part of it back is exact (speculative
  // verification). Dense caches: no limit but the capacity.
  virtual uint32_t exact_append_room() const { return UINT32_MAX; }
  // Forgets every position (a new conversation); the storage stays.
  virtual void reset() = 0;

  // The stored state of positions 0..position-1 (what a session saves to resume later):
  // its size, a copy into `out` (state_bytes(position) bytes), and the copy back into a
  // cache of the same spec and capacity. load_state checks sizes and counters
  // (CorruptFile on anything inconsistent) and leaves the cache reset when it fails.
  virtual size_t state_bytes(uint32_t position) const = 0;
  virtual void save_state(uint32_t position, uint8_t* out) const = 0;
  virtual Error load_state(uint32_t position, const uint8_t* in, size_t size) = 0;

  // Rows of positions [begin, begin + count) as floats in the original basis, evicted
  // positions as zeros: for tests and tools that inspect the cache, never for attention.
  virtual void read_keys(uint32_t layer, uint32_t kv_head, uint32_t begin, uint32_t count, float* out) const = 0;
  virtual void read_values(uint32_t layer, uint32_t kv_head, uint32_t begin, uint32_t count, float* out) const = 0;
  // The per-head compressed cache behind this interface, or null (no RTTI in device code):
  // for tests and tools that look at what it keeps.
  virtual const CompressedKvCache* compressed() const { return nullptr; }

 protected:
  KvCache(KvShape shape, uint32_t capacity) : shape_(shape), capacity_(capacity) {}
  // One KV head and its query group for every token of `a`.
  virtual void attend_head(uint32_t layer, uint32_t kv_head, const KvAttention& a) const = 0;

  KvShape shape_;
  uint32_t capacity_;
};

// The dense caches (f32 or f16 rows, exact): bytes per position over all layers and heads,
// the arena bytes of one holding `tokens` positions (object and alignment included), and
// the cache itself built inside `arena` (nothing to free).
size_t dense_kv_bytes_per_token(KvType type, const KvShape& shape);
size_t dense_kv_arena_bytes(KvType type, const KvShape& shape, uint32_t tokens);
Result<KvCache*> create_dense_kv_cache(KvType type, const KvShape& shape, uint32_t tokens, ArenaAllocator& arena);
// Scores per KV head the dense cache's attention needs: every query head of a group over
// the capacity.
inline size_t dense_attention_scores_per_head(uint32_t group, uint32_t capacity) {
  return static_cast<size_t>(group) * capacity;
}

}  // namespace tern
