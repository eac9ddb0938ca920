// Reference loops for dense attention: the order every ISA reproduces.
#include "kernels/dense_attention.h"

namespace tern {
namespace {

template <typename Element>
void block_scores(const float* q, uint32_t queries, uint32_t head_dim, const Element* keys, uint32_t blocks,
                  float scale, float* scores, size_t stride) {
  for (uint32_t b = 0; b < blocks; ++b) {
    const Element* block = keys + static_cast<size_t>(b) * head_dim * kKvKeyBlock;
    for (uint32_t j = 0; j < queries; ++j) {
      const float* qj = q + static_cast<size_t>(j) * head_dim;
      float dot[kKvKeyBlock] = {};
      for (uint32_t i = 0; i < head_dim; ++i)
        for (uint32_t k = 0; k < kKvKeyBlock; ++k) dot[k] += qj[i] * dense_attention_widen(block[i * kKvKeyBlock + k]);
      for (uint32_t k = 0; k < kKvKeyBlock; ++k) scores[j * stride + b * kKvKeyBlock + k] = dot[k] * scale;
    }
  }
}

// Sixteen columns at a time held across all positions (a pass per position would load and
// store `out` for every one).
template <typename Element>
uint32_t value_columns(const float* probs, size_t p_stride, uint32_t queries, const Element* values, uint32_t head_dim,
                       uint32_t len, float* out) {
  constexpr uint32_t kChunk = 16;
  uint32_t c0 = 0;
  for (; c0 + kChunk <= head_dim; c0 += kChunk) {
    for (uint32_t j = 0; j < queries; ++j) {
      float acc[kChunk] = {};
      for (uint32_t p = 0; p < len; ++p) {
        const float w = probs[j * p_stride + p];
        const Element* v = values + static_cast<size_t>(p) * head_dim + c0;
        for (uint32_t k = 0; k < kChunk; ++k) acc[k] += w * dense_attention_widen(v[k]);
      }
      for (uint32_t k = 0; k < kChunk; ++k) out[static_cast<size_t>(j) * head_dim + c0 + k] = acc[k];
    }
  }
  return c0;
}

}  // namespace

const DenseAttentionUkernels dense_attention__scalar = {block_scores<float>, value_columns<float>,
                                                        block_scores<uint16_t>, value_columns<uint16_t>};

}  // namespace tern
