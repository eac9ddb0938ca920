#include "runtime/kv_cache.h"

#include <cstring>
#include <new>
#include <type_traits>

#include "kernels/dense_matmul.h"

namespace tern {

const char* to_string(KvType type) {
  switch (type) {
    case KvType::F16: return "f16";
    case KvType::F32: return "f32";
  }
  return "unknown";
}

namespace {

constexpr size_t kKvAlignment = 64;

size_t element_bytes(KvType type) { return type == KvType::F16 ? 2 : 4; }

// Dense storage; one head's history is contiguous ([layer][kv_head][...]). Values are rows
// [pos][head_dim]; keys are in blocks of kKvKeyBlock positions, element-major inside a block
// ([block][head_dim][kKvKeyBlock]), so attention scores a block of keys with whole-vector
// loads, each key's dot product still one running sum (see kv_key_index).
template <typename Element>
class DenseKvCache final : public KvCache {
 public:
  DenseKvCache(KvShape shape, uint32_t capacity, Element* keys, Element* values)
      : KvCache(shape, capacity), keys_(keys), values_(values) {}

  void write(uint32_t layer, uint32_t kv_head, uint32_t pos, const float* key, const float* value) override {
    Element* k = head(keys_, layer, kv_head);
    Element* v = head(values_, layer, kv_head) + static_cast<size_t>(pos) * shape_.head_dim;
    for (uint32_t i = 0; i < shape_.head_dim; ++i) {
      k[kv_key_index(pos, i, shape_.head_dim, capacity_)] = encode(key[i]);
      v[i] = encode(value[i]);
    }
  }
  void read_keys(uint32_t layer, uint32_t kv_head, uint32_t begin, uint32_t count, float* out) const override {
    const Element* k = head(keys_, layer, kv_head);
    for (uint32_t p = begin; p < begin + count; ++p)
      for (uint32_t i = 0; i < shape_.head_dim; ++i)
        decode(&k[kv_key_index(p, i, shape_.head_dim, capacity_)], 1, out++);
  }
  void read_values(uint32_t layer, uint32_t kv_head, uint32_t begin, uint32_t count, float* out) const override {
    decode(head(values_, layer, kv_head) + static_cast<size_t>(begin) * shape_.head_dim,
           static_cast<size_t>(count) * shape_.head_dim, out);
  }
  const float* key_blocks(uint32_t layer, uint32_t kv_head) const override {
    return stored_as<float>(keys_, layer, kv_head);
  }
  const float* value_rows(uint32_t layer, uint32_t kv_head) const override {
    return stored_as<float>(values_, layer, kv_head);
  }
  const uint16_t* key_blocks_f16(uint32_t layer, uint32_t kv_head) const override {
    return stored_as<uint16_t>(keys_, layer, kv_head);
  }
  const uint16_t* value_rows_f16(uint32_t layer, uint32_t kv_head) const override {
    return stored_as<uint16_t>(values_, layer, kv_head);
  }

 private:
  // One head's storage if it is stored as T, else null.
  template <typename T>
  const T* stored_as(Element* base, uint32_t layer, uint32_t kv_head) const {
    if constexpr (std::is_same_v<Element, T>) return head(base, layer, kv_head);
    return nullptr;
  }
  Element* head(Element* base, uint32_t layer, uint32_t kv_head) const {
    const size_t head_index = static_cast<size_t>(layer) * shape_.kv_heads + kv_head;
    return base + head_index * capacity_ * shape_.head_dim;
  }
  static Element encode(float x);
  static void decode(const Element* src, size_t n, float* out);

  Element* keys_;
  Element* values_;
};

template <>
float DenseKvCache<float>::encode(float x) { return x; }
template <>
void DenseKvCache<float>::decode(const float* src, size_t n, float* out) { std::memcpy(out, src, n * sizeof(float)); }
template <>
uint16_t DenseKvCache<uint16_t>::encode(float x) { return f32_to_f16(x); }
template <>
void DenseKvCache<uint16_t>::decode(const uint16_t* src, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = f16_to_f32(src[i]);
}

size_t plane_bytes(KvType type, const KvShape& shape, uint32_t tokens) {
  return static_cast<size_t>(shape.layers) * shape.kv_heads * tokens * shape.head_dim * element_bytes(type);
}

size_t object_bytes(KvType type) {
  return type == KvType::F16 ? sizeof(DenseKvCache<uint16_t>) : sizeof(DenseKvCache<float>);
}

}  // namespace

size_t kv_bytes_per_token(KvType type, const KvShape& shape) { return plane_bytes(type, shape, 1) * 2; }

size_t kv_arena_bytes(KvType type, const KvShape& shape, uint32_t tokens) {
  return align_up(object_bytes(type), kKvAlignment) + 2 * align_up(plane_bytes(type, shape, tokens), kKvAlignment) +
         kKvAlignment;
}

uint32_t kv_tokens_for_bytes(KvType type, const KvShape& shape, size_t bytes) {
  const size_t fixed = kv_arena_bytes(type, shape, 0) + 2 * kKvAlignment;  // worst-case padding
  const size_t per_token = kv_bytes_per_token(type, shape);
  if (per_token == 0 || bytes <= fixed) return 0;
  const size_t tokens = (bytes - fixed) / per_token;
  return tokens > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(tokens);
}

Result<KvCache*> create_kv_cache(KvType type, const KvShape& shape, uint32_t tokens, ArenaAllocator& arena) {
  if (shape.layers == 0 || shape.kv_heads == 0 || shape.head_dim == 0 || tokens == 0) {
    return fail(Error::InvalidArgument, "KV cache of %u layers x %u heads x %u dims x %u tokens", shape.layers,
                shape.kv_heads, shape.head_dim, tokens);
  }
  const size_t bytes = plane_bytes(type, shape, tokens);
  TERN_ASSIGN_OR_RETURN(void* object, arena.allocate(object_bytes(type), kKvAlignment, ArenaPurpose::KvCache));
  TERN_ASSIGN_OR_RETURN(void* keys, arena.allocate(bytes, kKvAlignment, ArenaPurpose::KvCache));
  TERN_ASSIGN_OR_RETURN(void* values, arena.allocate(bytes, kKvAlignment, ArenaPurpose::KvCache));
  switch (type) {
    case KvType::F16:
      return static_cast<KvCache*>(new (object) DenseKvCache<uint16_t>(shape, tokens, static_cast<uint16_t*>(keys),
                                                                       static_cast<uint16_t*>(values)));
    case KvType::F32:
      return static_cast<KvCache*>(
          new (object) DenseKvCache<float>(shape, tokens, static_cast<float*>(keys), static_cast<float*>(values)));
  }
  return fail(Error::InvalidArgument, "unknown KV type %u", static_cast<unsigned>(type));
}

}  // namespace tern
