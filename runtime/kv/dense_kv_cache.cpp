#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <type_traits>

#include "kernels/dense_attention.h"
#include "kernels/dense_matmul.h"
#include "kernels/kv_attention.h"
#include "kernels/kv_quant.h"
#include "runtime/kv/kv_cache.h"

namespace tern {

namespace {

constexpr size_t kKvAlignment = 64;

size_t element_bytes(KvType type) { return type == KvType::F16 ? 2 : 4; }

// Dense storage, exact; one head's history is contiguous ([layer][kv_head][...]). Values are
// rows [pos][head_dim]; keys are in blocks of kKvKeyBlock positions, element-major inside a
// block ([block][head_dim][kKvKeyBlock]), so attention scores a block of keys with
// whole-vector loads, each key's dot product still one running sum (see kv_key_index).
// Attention reads it in place: f32 as stored, f16 widened by the kernels as they load.
template <typename Element>
class DenseKvCache final : public KvCache {
 public:
  DenseKvCache(KvShape shape, uint32_t capacity, Element* keys, Element* values)
      : KvCache(shape, capacity), keys_(keys), values_(values) {}

  Error write(uint32_t layer, uint32_t kv_head, uint32_t pos, const float* key, const float* value) override {
    TERN_CHECK_OR_RETURN(pos < capacity_, Error::ContextFull, "position %u exceeds the KV cache's %u", pos, capacity_);
    Element* k = head(keys_, layer, kv_head);
    Element* v = head(values_, layer, kv_head) + static_cast<size_t>(pos) * shape_.head_dim;
    const uint32_t hd = shape_.head_dim;
    encode_row(value, hd, v);
    if (pos >= capacity_ / kKvKeyBlock * kKvKeyBlock) {  // past the last whole key block: a row
      encode_row(key, hd, k + static_cast<size_t>(pos) * hd);
      return Error::Ok;
    }
    // A blocked key: channel i of this position every kKvKeyBlock elements.
    Element* column = k + kv_key_index(pos, 0, hd, capacity_);
    Element row[kChunk];
    for (uint32_t i0 = 0; i0 < hd; i0 += kChunk) {
      const uint32_t n = hd - i0 < kChunk ? hd - i0 : kChunk;
      encode_row(key + i0, n, row);
      for (uint32_t i = 0; i < n; ++i) column[static_cast<size_t>(i0 + i) * kKvKeyBlock] = row[i];
    }
    return Error::Ok;
  }
  size_t attention_scores_per_head(uint32_t group) const override {
    return dense_attention_scores_per_head(group, capacity_);
  }
  // Positions past the ones kept are simply overwritten by the next writes.
  Error rollback_to(uint32_t) override { return Error::Ok; }
  void reset() override {}
  // Per head, the key blocks holding positions < position (a prefix of the element-major
  // blocks) and the value rows before it.
  size_t state_bytes(uint32_t position) const override {
    return static_cast<size_t>(shape_.layers) * shape_.kv_heads * head_state_elements(position) * sizeof(Element);
  }
  void save_state(uint32_t position, uint8_t* out) const override {
    copy_state(position, [&](Element* stored, size_t n) {
      std::memcpy(out, stored, n * sizeof(Element));
      out += n * sizeof(Element);
    });
  }
  Error load_state(uint32_t position, const uint8_t* in, size_t size) override {
    TERN_CHECK_OR_RETURN(position <= capacity_ && size == state_bytes(position), Error::CorruptFile,
                         "dense KV state of %zu bytes for %u positions (capacity %u) needs %zu", size, position,
                         capacity_, position <= capacity_ ? state_bytes(position) : 0);
    copy_state(position, [&](Element* stored, size_t n) {
      std::memcpy(stored, in, n * sizeof(Element));
      in += n * sizeof(Element);
    });
    return Error::Ok;
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

 protected:
  void attend_head(uint32_t layer, uint32_t kv_head, const KvAttention& a) const override;

 private:
  Element* head(Element* base, uint32_t layer, uint32_t kv_head) const {
    const size_t head_index = static_cast<size_t>(layer) * shape_.kv_heads + kv_head;
    return base + head_index * capacity_ * shape_.head_dim;
  }
  size_t key_state_elements(uint32_t position) const { return kv_key_extent(position, shape_.head_dim, capacity_); }
  size_t head_state_elements(uint32_t position) const {
    return key_state_elements(position) + static_cast<size_t>(position) * shape_.head_dim;
  }
  template <typename Fn>
  void copy_state(uint32_t position, Fn&& fn) const {
    for (uint32_t l = 0; l < shape_.layers; ++l)
      for (uint32_t h = 0; h < shape_.kv_heads; ++h) {
        fn(head(keys_, l, h), key_state_elements(position));
        fn(head(values_, l, h), static_cast<size_t>(position) * shape_.head_dim);
      }
  }
  static constexpr uint32_t kChunk = 64;  // key channels converted at a time
  // f16: the ISA's conversion (half.h's rounding, bit for bit), ~2.5 % of a 2B-4T prefill as
  // a scalar loop.
  static void encode_row(const float* x, uint32_t n, Element* out);
  static void decode(const Element* src, size_t n, float* out);
  static void scores(Isa isa, const float* q, uint32_t group, uint32_t hd, const Element* keys, uint32_t len,
                     uint32_t capacity, float scale, float* out, size_t stride);
  static void values(Isa isa, const float* probs, size_t stride, uint32_t group, const Element* rows, uint32_t hd,
                     uint32_t len, float* out);

  Element* keys_;
  Element* values_;
};

template <>
void DenseKvCache<float>::encode_row(const float* x, uint32_t n, float* out) {
  std::memcpy(out, x, n * sizeof(float));
}
template <>
void DenseKvCache<float>::decode(const float* src, size_t n, float* out) {
  std::memcpy(out, src, n * sizeof(float));
}
template <>
void DenseKvCache<uint16_t>::encode_row(const float* x, uint32_t n, uint16_t* out) {
  kv_float_halves(active_isa_level(), x, n, out);
}
template <>
void DenseKvCache<uint16_t>::decode(const uint16_t* src, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = f16_to_f32(src[i]);
}
template <>
void DenseKvCache<float>::scores(Isa isa, const float* q, uint32_t group, uint32_t hd, const float* keys, uint32_t len,
                                 uint32_t capacity, float scale, float* out, size_t stride) {
  dense_attention_scores(isa, q, group, hd, keys, len, capacity, scale, out, stride);
}
template <>
void DenseKvCache<uint16_t>::scores(Isa isa, const float* q, uint32_t group, uint32_t hd, const uint16_t* keys,
                                    uint32_t len, uint32_t capacity, float scale, float* out, size_t stride) {
  dense_attention_scores_f16(isa, q, group, hd, keys, len, capacity, scale, out, stride);
}
template <>
void DenseKvCache<float>::values(Isa isa, const float* probs, size_t stride, uint32_t group, const float* rows,
                                 uint32_t hd, uint32_t len, float* out) {
  dense_attention_values(isa, probs, stride, group, rows, hd, len, out);
}
template <>
void DenseKvCache<uint16_t>::values(Isa isa, const float* probs, size_t stride, uint32_t group, const uint16_t* rows,
                                    uint32_t hd, uint32_t len, float* out) {
  dense_attention_values_f16(isa, probs, stride, group, rows, hd, len, out);
}

// Causal attention of the batch's tokens for one KV head and its query group: scores of
// every kept key (the group's query heads share each key load), softmax, weighted values.
template <typename Element>
void DenseKvCache<Element>::attend_head(uint32_t layer, uint32_t kv_head, const KvAttention& a) const {
  const uint32_t hd = shape_.head_dim, group = a.heads / shape_.kv_heads;
  const size_t qd = static_cast<size_t>(a.heads) * hd;
  const Element* keys = head(keys_, layer, kv_head);
  const Element* rows = head(values_, layer, kv_head);
  float* sc = a.scores + static_cast<size_t>(kv_head) * a.scores_per_head;
  const size_t stride = capacity_;
  const Isa isa = active_isa_level();
  for (uint32_t t = 0; t < a.n; ++t) {
    const uint32_t end = a.pos0 + t + 1;
    const size_t first = t * qd + static_cast<size_t>(kv_head) * group * hd;
    // Keys from a.first[t] on (packed texts, sliding windows): scored from the key block
    // holding it (kv_key_index's layout read from a block boundary is the same layout over
    // the positions from there), the ones before it get zero weight.
    const uint32_t from = a.first != nullptr ? a.first[t] : 0;
    const uint32_t base = from / kKvKeyBlock * kKvKeyBlock, skip = from - base, len = end - base;
    const size_t offset = static_cast<size_t>(base) * hd;
    scores(isa, a.q + first, group, hd, keys + offset, len, capacity_ - base, a.scale, sc, stride);
    for (uint32_t g = 0; g < group; ++g) {
      float* p = sc + g * stride;
      for (uint32_t i = 0; i < skip; ++i) p[i] = 0.0f;
      kv_softmax(p + skip, len - skip);
      if (a.observer != nullptr && a.observer->on_probs != nullptr) {
        a.observer->on_probs(a.observer->user, layer, kv_head * group + g, a.pos0 + t, p, len);
      }
    }
    values(isa, sc, stride, group, rows + offset, hd, len, a.out + first);
  }
}

size_t plane_bytes(KvType type, const KvShape& shape, uint32_t tokens) {
  return static_cast<size_t>(shape.layers) * shape.kv_heads * tokens * shape.head_dim * element_bytes(type);
}

size_t object_bytes(KvType type) {
  return type == KvType::F16 ? sizeof(DenseKvCache<uint16_t>) : sizeof(DenseKvCache<float>);
}

}  // namespace

size_t dense_kv_bytes_per_token(KvType type, const KvShape& shape) { return plane_bytes(type, shape, 1) * 2; }

size_t dense_kv_arena_bytes(KvType type, const KvShape& shape, uint32_t tokens) {
  return align_up(object_bytes(type), kKvAlignment) + 2 * align_up(plane_bytes(type, shape, tokens), kKvAlignment) +
         kKvAlignment;
}

Result<KvCache*> create_dense_kv_cache(KvType type, const KvShape& shape, uint32_t tokens, ArenaAllocator& arena) {
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
