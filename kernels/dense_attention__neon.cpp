// Dense attention with NEON (f16 caches widened by FCVTL on load): a key block is two
// float32x4 (eight keys' element i);
// values in chunks of 16 columns. vmulq + vaddq, never the fused vfmaq (-ffp-contract=off).
#include <arm_neon.h>

#include "kernels/dense_attention.h"

namespace tern {
namespace {

inline float32x4_t load4(const float* p) { return vld1q_f32(p); }
inline float32x4_t load4(const uint16_t* p) { return load_f16x4(p); }

template <uint32_t Q, typename Element>
void blocks_for(const float* q, uint32_t head_dim, const Element* keys, uint32_t blocks, float scale, float* scores,
                size_t stride) {
  const size_t block_floats = static_cast<size_t>(head_dim) * kKvKeyBlock;
  for (uint32_t b = 0; b < blocks; ++b) {
    const Element* block = keys + b * block_floats;
    if (b + kDenseAttentionPrefetchBlocks < blocks) {
      dense_attention_prefetch(block + kDenseAttentionPrefetchBlocks * block_floats, block_floats);
    }
    float32x4_t lo[Q], hi[Q];
    for (uint32_t j = 0; j < Q; ++j) lo[j] = hi[j] = vdupq_n_f32(0.0f);
    for (uint32_t i = 0; i < head_dim; ++i) {
      const float32x4_t kl = load4(block + i * kKvKeyBlock), kh = load4(block + i * kKvKeyBlock + 4);
      for (uint32_t j = 0; j < Q; ++j) {
        const float qi = q[static_cast<size_t>(j) * head_dim + i];
        lo[j] = vaddq_f32(lo[j], vmulq_n_f32(kl, qi));
        hi[j] = vaddq_f32(hi[j], vmulq_n_f32(kh, qi));
      }
    }
    for (uint32_t j = 0; j < Q; ++j) {
      float* s = scores + j * stride + b * kKvKeyBlock;
      vst1q_f32(s, vmulq_n_f32(lo[j], scale));
      vst1q_f32(s + 4, vmulq_n_f32(hi[j], scale));
    }
  }
}

template <typename Element>
void block_scores(const float* q, uint32_t queries, uint32_t head_dim, const Element* keys, uint32_t blocks,
                  float scale, float* scores, size_t stride) {
  with_query_count(queries, [&](auto n) {
    blocks_for<decltype(n)::value>(q, head_dim, keys, blocks, scale, scores, stride);
  });
}

template <uint32_t Q, typename Element>
uint32_t columns_for(const float* probs, size_t p_stride, const Element* values, uint32_t head_dim, uint32_t len,
                     float* out) {
  constexpr uint32_t kChunk = 16;
  uint32_t c0 = 0;
  for (; c0 + kChunk <= head_dim; c0 += kChunk) {
    float32x4_t acc[Q][4];
    for (uint32_t j = 0; j < Q; ++j)
      for (uint32_t c = 0; c < 4; ++c) acc[j][c] = vdupq_n_f32(0.0f);
    for (uint32_t p = 0; p < len; ++p) {
      const Element* row = values + static_cast<size_t>(p) * head_dim;
      if (c0 == 0 && p + kDenseAttentionPrefetchRows < len) {
        dense_attention_prefetch(row + kDenseAttentionPrefetchRows * head_dim, head_dim);
      }
      float32x4_t v[4];
      for (uint32_t c = 0; c < 4; ++c) v[c] = load4(row + c0 + 4 * c);
      for (uint32_t j = 0; j < Q; ++j) {
        const float w = probs[j * p_stride + p];
        for (uint32_t c = 0; c < 4; ++c) acc[j][c] = vaddq_f32(acc[j][c], vmulq_n_f32(v[c], w));
      }
    }
    for (uint32_t j = 0; j < Q; ++j)
      for (uint32_t c = 0; c < 4; ++c) vst1q_f32(out + static_cast<size_t>(j) * head_dim + c0 + 4 * c, acc[j][c]);
  }
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

const DenseAttentionUkernels dense_attention__neon = {block_scores<float>, value_columns<float>,
                                                      block_scores<uint16_t>, value_columns<uint16_t>};

}  // namespace tern
