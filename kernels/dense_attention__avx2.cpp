// Dense attention with AVX2 (f16 caches widened by F16C on load): a key block is one ymm
// (eight keys' element i); values in chunks of 16 columns. Multiply and add stay separate
// (-ffp-contract=off on this file).
#include <immintrin.h>

#include "kernels/dense_attention.h"

namespace tern {
namespace {

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) { return load_f16x8(p); }

// B blocks for Q queries: 2 x 4 accumulators, each q[i] broadcast once for both blocks.
template <uint32_t Q, uint32_t B, typename Element>
inline void blocks_q(const float* q, uint32_t head_dim, const Element* block, float scale, float* scores,
                     size_t stride) {
  __m256 acc[Q][B];
  for (uint32_t j = 0; j < Q; ++j)
    for (uint32_t b = 0; b < B; ++b) acc[j][b] = _mm256_setzero_ps();
  const size_t block_floats = static_cast<size_t>(head_dim) * kKvKeyBlock;
  for (uint32_t i = 0; i < head_dim; ++i) {
    __m256 k[B];
    for (uint32_t b = 0; b < B; ++b) k[b] = load8(block + b * block_floats + i * kKvKeyBlock);
    for (uint32_t j = 0; j < Q; ++j) {
      const __m256 qi = _mm256_broadcast_ss(q + static_cast<size_t>(j) * head_dim + i);
      for (uint32_t b = 0; b < B; ++b) acc[j][b] = _mm256_add_ps(acc[j][b], _mm256_mul_ps(qi, k[b]));
    }
  }
  const __m256 s = _mm256_set1_ps(scale);
  for (uint32_t j = 0; j < Q; ++j)
    for (uint32_t b = 0; b < B; ++b) _mm256_storeu_ps(scores + j * stride + b * kKvKeyBlock, _mm256_mul_ps(acc[j][b], s));
}

template <uint32_t Q, typename Element>
void blocks_for(const float* q, uint32_t head_dim, const Element* keys, uint32_t blocks, float scale, float* scores,
                size_t stride) {
  const size_t block_floats = static_cast<size_t>(head_dim) * kKvKeyBlock;
  uint32_t b = 0;
  for (; b + 2 <= blocks; b += 2) {
    if (b + 2 + kDenseAttentionPrefetchBlocks <= blocks) {
      dense_attention_prefetch(keys + (b + kDenseAttentionPrefetchBlocks) * block_floats, 2 * block_floats);
    }
    blocks_q<Q, 2>(q, head_dim, keys + b * block_floats, scale, scores + b * kKvKeyBlock, stride);
  }
  if (b < blocks) blocks_q<Q, 1>(q, head_dim, keys + b * block_floats, scale, scores + b * kKvKeyBlock, stride);
}

template <typename Element>
void block_scores(const float* q, uint32_t queries, uint32_t head_dim, const Element* keys, uint32_t blocks,
                  float scale, float* scores, size_t stride) {
  with_query_count(queries, [&](auto n) {
    blocks_for<decltype(n)::value>(q, head_dim, keys, blocks, scale, scores, stride);
  });
}

// C ymm columns for Q queries, every position; the first pass fetches whole rows ahead.
template <uint32_t Q, uint32_t C, typename Element>
inline void columns_q(const float* probs, size_t p_stride, const Element* values, uint32_t head_dim, uint32_t len,
                      uint32_t c0, float* out) {
  __m256 acc[Q][C];
  for (uint32_t j = 0; j < Q; ++j)
    for (uint32_t c = 0; c < C; ++c) acc[j][c] = _mm256_setzero_ps();
  for (uint32_t p = 0; p < len; ++p) {
    const Element* row = values + static_cast<size_t>(p) * head_dim;
    if (c0 == 0 && p + kDenseAttentionPrefetchRows < len) {
      dense_attention_prefetch(row + kDenseAttentionPrefetchRows * head_dim, head_dim);
    }
    __m256 v[C];
    for (uint32_t c = 0; c < C; ++c) v[c] = load8(row + c0 + 8 * c);
    for (uint32_t j = 0; j < Q; ++j) {
      const __m256 w = _mm256_broadcast_ss(probs + j * p_stride + p);
      for (uint32_t c = 0; c < C; ++c) acc[j][c] = _mm256_add_ps(acc[j][c], _mm256_mul_ps(w, v[c]));
    }
  }
  for (uint32_t j = 0; j < Q; ++j)
    for (uint32_t c = 0; c < C; ++c) _mm256_storeu_ps(out + static_cast<size_t>(j) * head_dim + c0 + 8 * c, acc[j][c]);
}

template <uint32_t Q, typename Element>
uint32_t columns_for(const float* probs, size_t p_stride, const Element* values, uint32_t head_dim, uint32_t len,
                     float* out) {
  uint32_t c0 = 0;
  for (; c0 + 16 <= head_dim; c0 += 16) columns_q<Q, 2>(probs, p_stride, values, head_dim, len, c0, out);
  for (; c0 + 8 <= head_dim; c0 += 8) columns_q<Q, 1>(probs, p_stride, values, head_dim, len, c0, out);
  return c0;
}

template <typename Element>
uint32_t value_columns(const float* probs, size_t p_stride, uint32_t queries, const Element* values, uint32_t head_dim,
                       uint32_t len, float* out) {
  return with_query_count(queries, [&](auto n) {
    return columns_for<decltype(n)::value>(probs, p_stride, values, head_dim, len, out);
  });
}

}  // namespace

const DenseAttentionUkernels dense_attention__avx2 = {block_scores<float>, value_columns<float>,
                                                      block_scores<uint16_t>, value_columns<uint16_t>};

}  // namespace tern
