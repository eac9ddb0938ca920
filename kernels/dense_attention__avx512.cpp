// Dense attention with AVX-512 (f16 caches widened on load): one zmm holds element i of two
// key blocks (sixteen keys); values in chunks of 64 columns. Multiply and add stay separate
// (-ffp-contract=off here).
#include <immintrin.h>

#include "kernels/dense_attention.h"

namespace tern {
namespace {

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) { return load_f16x8(p); }
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) { return load_f16x16(p); }
inline __m512 load_two_blocks(const float* lo, const float* hi) {
  const __m512d l = _mm512_castpd256_pd512(_mm256_castps_pd(_mm256_loadu_ps(lo)));
  return _mm512_castpd_ps(_mm512_insertf64x4(l, _mm256_castps_pd(_mm256_loadu_ps(hi)), 1));
}
inline __m512 load_two_blocks(const uint16_t* lo, const uint16_t* hi) {
  const __m128i l = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo));
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi));
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(l), h, 1));
}

// 2*Z blocks for Q queries; scores of the blocks are adjacent, so each zmm stores at once.
template <uint32_t Q, uint32_t Z, typename Element>
inline void blocks_q(const float* q, uint32_t head_dim, const Element* block, float scale, float* scores,
                     size_t stride) {
  __m512 acc[Q][Z];
  for (uint32_t j = 0; j < Q; ++j)
    for (uint32_t z = 0; z < Z; ++z) acc[j][z] = _mm512_setzero_ps();
  const size_t block_floats = static_cast<size_t>(head_dim) * kKvKeyBlock;
  for (uint32_t i = 0; i < head_dim; ++i) {
    __m512 k[Z];
    for (uint32_t z = 0; z < Z; ++z) {
      const Element* b = block + 2 * z * block_floats + i * kKvKeyBlock;
      k[z] = load_two_blocks(b, b + block_floats);
    }
    for (uint32_t j = 0; j < Q; ++j) {
      const __m512 qi = _mm512_set1_ps(q[static_cast<size_t>(j) * head_dim + i]);
      for (uint32_t z = 0; z < Z; ++z) acc[j][z] = _mm512_add_ps(acc[j][z], _mm512_mul_ps(qi, k[z]));
    }
  }
  const __m512 s = _mm512_set1_ps(scale);
  for (uint32_t j = 0; j < Q; ++j)
    for (uint32_t z = 0; z < Z; ++z) _mm512_storeu_ps(scores + j * stride + 2 * z * kKvKeyBlock, _mm512_mul_ps(acc[j][z], s));
}

// The last odd block: one ymm.
template <uint32_t Q, typename Element>
inline void one_block_q(const float* q, uint32_t head_dim, const Element* block, float scale, float* scores,
                        size_t stride) {
  __m256 acc[Q];
  for (uint32_t j = 0; j < Q; ++j) acc[j] = _mm256_setzero_ps();
  for (uint32_t i = 0; i < head_dim; ++i) {
    const __m256 k = load8(block + i * kKvKeyBlock);
    for (uint32_t j = 0; j < Q; ++j)
      acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(_mm256_set1_ps(q[static_cast<size_t>(j) * head_dim + i]), k));
  }
  for (uint32_t j = 0; j < Q; ++j) _mm256_storeu_ps(scores + j * stride, _mm256_mul_ps(acc[j], _mm256_set1_ps(scale)));
}

template <uint32_t Q, typename Element>
void blocks_for(const float* q, uint32_t head_dim, const Element* keys, uint32_t blocks, float scale, float* scores,
                size_t stride) {
  const size_t block_floats = static_cast<size_t>(head_dim) * kKvKeyBlock;
  uint32_t b = 0;
  for (; b + 4 <= blocks; b += 4) {
    if (b + 4 + kDenseAttentionPrefetchBlocks <= blocks) {
      dense_attention_prefetch(keys + (b + kDenseAttentionPrefetchBlocks) * block_floats, 4 * block_floats);
    }
    blocks_q<Q, 2>(q, head_dim, keys + b * block_floats, scale, scores + b * kKvKeyBlock, stride);
  }
  for (; b + 2 <= blocks; b += 2) blocks_q<Q, 1>(q, head_dim, keys + b * block_floats, scale, scores + b * kKvKeyBlock, stride);
  if (b < blocks) one_block_q<Q>(q, head_dim, keys + b * block_floats, scale, scores + b * kKvKeyBlock, stride);
}

template <typename Element>
void block_scores(const float* q, uint32_t queries, uint32_t head_dim, const Element* keys, uint32_t blocks,
                  float scale, float* scores, size_t stride) {
  with_query_count(queries, [&](auto n) {
    blocks_for<decltype(n)::value>(q, head_dim, keys, blocks, scale, scores, stride);
  });
}

// C zmm columns for Q queries over every position; the first pass fetches whole rows ahead.
template <uint32_t Q, uint32_t C, typename Element>
inline void columns_q(const float* probs, size_t p_stride, const Element* values, uint32_t head_dim, uint32_t len,
                      uint32_t c0, float* out) {
  __m512 acc[Q][C];
  for (uint32_t j = 0; j < Q; ++j)
    for (uint32_t c = 0; c < C; ++c) acc[j][c] = _mm512_setzero_ps();
  for (uint32_t p = 0; p < len; ++p) {
    const Element* row = values + static_cast<size_t>(p) * head_dim;
    if (c0 == 0 && p + kDenseAttentionPrefetchRows < len) {
      dense_attention_prefetch(row + kDenseAttentionPrefetchRows * head_dim, head_dim);
    }
    __m512 v[C];
    for (uint32_t c = 0; c < C; ++c) v[c] = load16(row + c0 + 16 * c);
    for (uint32_t j = 0; j < Q; ++j) {
      const __m512 w = _mm512_set1_ps(probs[j * p_stride + p]);
      for (uint32_t c = 0; c < C; ++c) acc[j][c] = _mm512_add_ps(acc[j][c], _mm512_mul_ps(w, v[c]));
    }
  }
  for (uint32_t j = 0; j < Q; ++j)
    for (uint32_t c = 0; c < C; ++c) _mm512_storeu_ps(out + static_cast<size_t>(j) * head_dim + c0 + 16 * c, acc[j][c]);
}

template <uint32_t Q, typename Element>
uint32_t columns_for(const float* probs, size_t p_stride, const Element* values, uint32_t head_dim, uint32_t len,
                     float* out) {
  uint32_t c0 = 0;
  for (; c0 + 64 <= head_dim; c0 += 64) columns_q<Q, 4>(probs, p_stride, values, head_dim, len, c0, out);
  for (; c0 + 16 <= head_dim; c0 += 16) columns_q<Q, 1>(probs, p_stride, values, head_dim, len, c0, out);
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

const DenseAttentionUkernels dense_attention__avx512 = {block_scores<float>, value_columns<float>,
                                                        block_scores<uint16_t>, value_columns<uint16_t>};

}  // namespace tern
