// The dense attention loops shared by dense_attention__{avx2,avx512,neon}.cpp. Every function
// is a template on the including file's traits `K` (internal to that file, so each
// instantiation carries only its ISA flags, -ffp-contract=off included): the f32 vector ops
// of f32_vec_<isa>.h (Vec, kWidth, zero, set1, load of floats or halves, store, add, mul);
// a vector wider than a key block (kWidth 16) also gives load_blocks(lo, hi), element i of
// two adjacent blocks, and Half, the traits of a block-wide vector for an odd last block.
// Steps: ScoreBlocks key blocks per step of the key loop (prefetched ahead); ValueWide and
// ValueNarrow vectors of columns per value pass (ValueNarrow 0: none).
// Every sum is a multiply then an add in the scalar order (dense_attention.h).
#pragma once

#include "kernels/dense_attention.h"

namespace tern {
namespace dense_attention_impl {

// Element i of keys [z * kWidth, (z + 1) * kWidth) of the blocks starting at `blocks`.
template <typename K, typename Element>
inline typename K::Vec key_vector(const Element* blocks, size_t block_floats, uint32_t i, uint32_t z) {
  const uint32_t first = z * K::kWidth;
  const Element* p = blocks + first / kKvKeyBlock * block_floats + i * kKvKeyBlock + first % kKvKeyBlock;
  if constexpr (K::kWidth > kKvKeyBlock) {
    return K::load_blocks(p, p + block_floats);
  } else {
    return K::load(p);
  }
}

// Z vectors of keys for Q queries: each q[i] broadcast once for all of them.
template <typename K, uint32_t Q, uint32_t Z, typename Element>
inline void blocks_q(const float* q, uint32_t head_dim, const Element* blocks, float scale, float* scores,
                     size_t stride) {
  typename K::Vec acc[Q][Z];
  for (uint32_t j = 0; j < Q; ++j)
    for (uint32_t z = 0; z < Z; ++z) acc[j][z] = K::zero();
  const size_t block_floats = static_cast<size_t>(head_dim) * kKvKeyBlock;
  for (uint32_t i = 0; i < head_dim; ++i) {
    typename K::Vec k[Z];
    for (uint32_t z = 0; z < Z; ++z) k[z] = key_vector<K>(blocks, block_floats, i, z);
    for (uint32_t j = 0; j < Q; ++j) {
      const typename K::Vec qi = K::set1(q[static_cast<size_t>(j) * head_dim + i]);
      for (uint32_t z = 0; z < Z; ++z) acc[j][z] = K::add(acc[j][z], K::mul(qi, k[z]));
    }
  }
  const typename K::Vec s = K::set1(scale);
  for (uint32_t j = 0; j < Q; ++j)
    for (uint32_t z = 0; z < Z; ++z) K::store(scores + j * stride + z * K::kWidth, K::mul(acc[j][z], s));
}

template <typename K, uint32_t ScoreBlocks, uint32_t Q, typename Element>
void blocks_for(const float* q, uint32_t head_dim, const Element* keys, uint32_t blocks, float scale, float* scores,
                size_t stride) {
  const size_t block_floats = static_cast<size_t>(head_dim) * kKvKeyBlock;
  constexpr uint32_t kWide = ScoreBlocks;
  constexpr uint32_t kNarrow = K::kWidth > kKvKeyBlock ? K::kWidth / kKvKeyBlock : 1;  // blocks per vector
  uint32_t b = 0;
  for (; b + kWide <= blocks; b += kWide) {
    if (b + kWide + kDenseAttentionPrefetchBlocks <= blocks) {
      dense_attention_prefetch(keys + (b + kDenseAttentionPrefetchBlocks) * block_floats, kWide * block_floats);
    }
    blocks_q<K, Q, kWide * kKvKeyBlock / K::kWidth>(q, head_dim, keys + b * block_floats, scale,
                                                    scores + b * kKvKeyBlock, stride);
  }
  for (; b + kNarrow <= blocks; b += kNarrow)
    blocks_q<K, Q, kNarrow * kKvKeyBlock / K::kWidth>(q, head_dim, keys + b * block_floats, scale,
                                                      scores + b * kKvKeyBlock, stride);
  if constexpr (kNarrow > 1) {
    if (b < blocks)
      blocks_q<typename K::Half, Q, 1>(q, head_dim, keys + b * block_floats, scale, scores + b * kKvKeyBlock, stride);
  }
}

template <typename K, uint32_t ScoreBlocks, typename Element>
void block_scores(const float* q, uint32_t queries, uint32_t head_dim, const Element* keys, uint32_t blocks,
                  float scale, float* scores, size_t stride) {
  with_query_count(queries, [&](auto n) {
    blocks_for<K, ScoreBlocks, decltype(n)::value>(q, head_dim, keys, blocks, scale, scores, stride);
  });
}

// C vectors of columns for Q queries over every position; the first pass fetches whole rows ahead.
template <typename K, uint32_t Q, uint32_t C, typename Element>
inline void columns_q(const float* probs, size_t p_stride, const Element* values, uint32_t head_dim, uint32_t len,
                      uint32_t c0, float* out) {
  typename K::Vec acc[Q][C];
  for (uint32_t j = 0; j < Q; ++j)
    for (uint32_t c = 0; c < C; ++c) acc[j][c] = K::zero();
  for (uint32_t p = 0; p < len; ++p) {
    const Element* row = values + static_cast<size_t>(p) * head_dim;
    if (c0 == 0 && p + kDenseAttentionPrefetchRows < len) {
      dense_attention_prefetch(row + kDenseAttentionPrefetchRows * head_dim, head_dim);
    }
    typename K::Vec v[C];
    for (uint32_t c = 0; c < C; ++c) v[c] = K::load(row + c0 + K::kWidth * c);
    for (uint32_t j = 0; j < Q; ++j) {
      const typename K::Vec w = K::set1(probs[j * p_stride + p]);
      for (uint32_t c = 0; c < C; ++c) acc[j][c] = K::add(acc[j][c], K::mul(w, v[c]));
    }
  }
  for (uint32_t j = 0; j < Q; ++j)
    for (uint32_t c = 0; c < C; ++c) K::store(out + static_cast<size_t>(j) * head_dim + c0 + K::kWidth * c, acc[j][c]);
}

template <typename K, uint32_t ValueWide, uint32_t ValueNarrow, uint32_t Q, typename Element>
uint32_t columns_for(const float* probs, size_t p_stride, const Element* values, uint32_t head_dim, uint32_t len,
                     float* out) {
  constexpr uint32_t kWide = ValueWide * K::kWidth, kNarrow = ValueNarrow * K::kWidth;
  uint32_t c0 = 0;
  for (; c0 + kWide <= head_dim; c0 += kWide)
    columns_q<K, Q, ValueWide>(probs, p_stride, values, head_dim, len, c0, out);
  if constexpr (kNarrow > 0) {
    for (; c0 + kNarrow <= head_dim; c0 += kNarrow)
      columns_q<K, Q, ValueNarrow>(probs, p_stride, values, head_dim, len, c0, out);
  }
  return c0;
}

template <typename K, uint32_t ValueWide, uint32_t ValueNarrow, typename Element>
uint32_t value_columns(const float* probs, size_t p_stride, uint32_t queries, const Element* values, uint32_t head_dim,
                       uint32_t len, float* out) {
  return with_query_count(queries, [&](auto n) {
    return columns_for<K, ValueWide, ValueNarrow, decltype(n)::value>(probs, p_stride, values, head_dim, len, out);
  });
}

template <typename K, uint32_t ScoreBlocks, uint32_t ValueWide, uint32_t ValueNarrow>
constexpr DenseAttentionUkernels ukernels() {
  return {block_scores<K, ScoreBlocks, float>, value_columns<K, ValueWide, ValueNarrow, float>,
          block_scores<K, ScoreBlocks, uint16_t>, value_columns<K, ValueWide, ValueNarrow, uint16_t>};
}

}  // namespace dense_attention_impl
}  // namespace tern
