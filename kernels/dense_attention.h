// Attention over a dense f32 KV cache for the query heads of one KV head (a GQA group),
// reading the cache in place: keys in element-major blocks of kKvKeyBlock positions (one
// vector load holds one element of several keys), values as rows. Every key's dot product
// and every output element is one running sum in the scalar order (index 0 first, multiply
// then add, never fused), so each ISA returns the scalar reference's floats bit for bit and
// greedy text does not depend on the CPU (bitllama2c-3M's reference has top-2 gaps of 0.021).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/dense_matmul.h"
#include "kernels/kv_quant.h"

namespace tern {

// Where element i of position p's key lies in one head's key storage holding `capacity`
// positions: whole blocks of kKvKeyBlock positions element-major ([block][head_dim][kKvKeyBlock]),
// the positions past the last whole block as rows. capacity * head_dim elements either way.
constexpr uint32_t kKvKeyBlock = 8;
inline size_t kv_key_index(uint32_t p, uint32_t i, uint32_t head_dim, uint32_t capacity) {
  const uint32_t blocked = capacity / kKvKeyBlock * kKvKeyBlock;
  if (p >= blocked) return static_cast<size_t>(p) * head_dim + i;
  return (static_cast<size_t>(p / kKvKeyBlock) * head_dim + i) * kKvKeyBlock + p % kKvKeyBlock;
}
// Elements of that storage from its start that hold every key of positions [0, count).
inline size_t kv_key_extent(uint32_t count, uint32_t head_dim, uint32_t capacity) {
  const uint32_t blocked = capacity / kKvKeyBlock * kKvKeyBlock;
  const uint32_t positions = count <= blocked ? (count + kKvKeyBlock - 1) / kKvKeyBlock * kKvKeyBlock : count;
  return static_cast<size_t>(positions) * head_dim;
}

// scores[j*stride + p] = (Σ_i q[j*head_dim + i] * key(p, i)) * scale for p < len and every
// query j < queries, key(p, i) = keys[kv_key_index(p, i, head_dim, capacity)]. stride >=
// capacity: the rest of len's key block, when that block is stored blocked, is scored too
// (from whatever those keys hold) and the caller ignores it; nothing past it is written.
void dense_attention_scores(Isa isa, const float* q, uint32_t queries, uint32_t head_dim, const float* keys,
                            uint32_t len, uint32_t capacity, float scale, float* scores, size_t stride);
// out[j*head_dim + i] = Σ_p probs[j*p_stride + p] * values[p*head_dim + i] over p < len.
void dense_attention_values(Isa isa, const float* probs, size_t p_stride, uint32_t queries, const float* values,
                            uint32_t head_dim, uint32_t len, float* out);
// The same over an f16 cache (IEEE halves), read in place: each half widens exactly, so the
// results equal the f32 kernels' over the widened cache.
void dense_attention_scores_f16(Isa isa, const float* q, uint32_t queries, uint32_t head_dim, const uint16_t* keys,
                                uint32_t len, uint32_t capacity, float scale, float* scores, size_t stride);
void dense_attention_values_f16(Isa isa, const float* probs, size_t p_stride, uint32_t queries, const uint16_t* values,
                                uint32_t head_dim, uint32_t len, float* out);

// Per-ISA inner loops (dense_attention__<isa>.cpp); queries is 1..kKvMaxQueries.
struct DenseAttentionUkernels {
  // The first `blocks` whole key blocks (positions [0, blocks * kKvKeyBlock)).
  void (*block_scores)(const float* q, uint32_t queries, uint32_t head_dim, const float* keys, uint32_t blocks,
                       float scale, float* scores, size_t stride);
  // Columns [0, returned) of out, the ISA's whole column chunks; the caller does the rest.
  uint32_t (*value_columns)(const float* probs, size_t p_stride, uint32_t queries, const float* values,
                            uint32_t head_dim, uint32_t len, float* out);
  void (*block_scores_f16)(const float* q, uint32_t queries, uint32_t head_dim, const uint16_t* keys, uint32_t blocks,
                           float scale, float* scores, size_t stride);
  uint32_t (*value_columns_f16)(const float* probs, size_t p_stride, uint32_t queries, const uint16_t* values,
                                uint32_t head_dim, uint32_t len, float* out);
};
extern const DenseAttentionUkernels dense_attention__scalar;
#if defined(__x86_64__)
extern const DenseAttentionUkernels dense_attention__avx2;
extern const DenseAttentionUkernels dense_attention__avx512;
#endif
#if defined(__aarch64__)
extern const DenseAttentionUkernels dense_attention__neon;
#endif
const DenseAttentionUkernels& dense_attention_ukernels(Isa isa);
// The level the dense attention kernels run (kernels/isa.h).
Isa dense_attention_active_isa();

// A cache element as f32 (halves widen exactly).
inline float dense_attention_widen(float x) { return x; }
inline float dense_attention_widen(uint16_t x) { return f16_to_f32(x); }

// Value rows (and key blocks) the loops ask the memory system for ahead of use: a decode
// step finds the cache evicted by the weights that streamed through since the last one.
constexpr uint32_t kDenseAttentionPrefetchRows = 8;
constexpr uint32_t kDenseAttentionPrefetchBlocks = 4;
template <typename Element>
inline void dense_attention_prefetch(const Element* p, size_t elements) {
  constexpr size_t kLine = 64 / sizeof(Element);
  for (size_t i = 0; i < elements; i += kLine) __builtin_prefetch(p + i);
}

}  // namespace tern
