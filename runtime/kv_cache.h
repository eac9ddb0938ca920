// KV storage behind one interface. The forward pass writes each new token's keys and
// values per (layer, kv head) and reads them back as float rows for attention, so a
// compressed per-head cache can replace the dense one without touching the forward pass.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dense_attention.h"  // the key block layout (kv_key_index)
#include "platform/error.h"
#include "runtime/arena.h"
#include "runtime/model_config.h"

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

class KvCache {
 public:
  virtual ~KvCache() = default;

  KvShape shape() const { return shape_; }
  // Positions the cache can hold.
  uint32_t capacity_tokens() const { return capacity_; }

  // Stores the key and value rows (head_dim floats each) of `pos` for one (layer, kv head).
  virtual void write(uint32_t layer, uint32_t kv_head, uint32_t pos, const float* key, const float* value) = 0;
  // Writes `count` rows of head_dim floats, positions [begin, begin + count), to `out`.
  virtual void read_keys(uint32_t layer, uint32_t kv_head, uint32_t begin, uint32_t count, float* out) const = 0;
  virtual void read_values(uint32_t layer, uint32_t kv_head, uint32_t begin, uint32_t count, float* out) const = 0;
  // Dense caches, for attention, in place: one head's keys laid out as kv_key_index says and
  // its value rows (position 0 first), as f32 from an f32 cache or IEEE halves from an f16
  // one (null otherwise: the compressed cache reads back through read_keys/read_values).
  virtual const float* key_blocks(uint32_t layer, uint32_t kv_head) const { return nullptr; }
  virtual const float* value_rows(uint32_t layer, uint32_t kv_head) const { return nullptr; }
  virtual const uint16_t* key_blocks_f16(uint32_t layer, uint32_t kv_head) const { return nullptr; }
  virtual const uint16_t* value_rows_f16(uint32_t layer, uint32_t kv_head) const { return nullptr; }
  // Forgets every position (a new conversation); the storage stays.
  virtual void reset() {}
  // The per-head compressed cache behind this interface, or null (no RTTI in device code).
  virtual CompressedKvCache* compressed() { return nullptr; }
  virtual const CompressedKvCache* compressed() const { return nullptr; }

 protected:
  KvCache(KvShape shape, uint32_t capacity) : shape_(shape), capacity_(capacity) {}
  KvShape shape_;
  uint32_t capacity_;
};

// Bytes one position costs in a cache of `type` (keys and values, all layers and heads).
size_t kv_bytes_per_token(KvType type, const KvShape& shape);
// Arena bytes for a cache of `tokens` positions, the object and alignment included.
size_t kv_arena_bytes(KvType type, const KvShape& shape, uint32_t tokens);
// Positions that fit in `bytes` of arena (0 if not even one).
uint32_t kv_tokens_for_bytes(KvType type, const KvShape& shape, size_t bytes);

// Builds the cache inside `arena` (storage and object); nothing to free.
Result<KvCache*> create_kv_cache(KvType type, const KvShape& shape, uint32_t tokens, ArenaAllocator& arena);

}  // namespace tern
