// Drivers for dense f32 attention: query heads in groups of kKvMaxQueries, the ISA's whole
// blocks and column chunks, the tails here in the same order.
#include "kernels/dense_attention.h"

#include <algorithm>

namespace tern {

namespace {

const IsaKernel<const DenseAttentionUkernels*> kDenseAttentionKernels[] = {
#if defined(__x86_64__)
    {Isa::Avx512, &dense_attention__avx512},
    {Isa::Avx2, &dense_attention__avx2},
#endif
#if defined(__aarch64__)
    {Isa::Neon, &dense_attention__neon},
#endif
    {Isa::Scalar, &dense_attention__scalar},
};

}  // namespace

const DenseAttentionUkernels& dense_attention_ukernels(Isa isa) {
  return *isa_select(kDenseAttentionKernels, isa_level_flags(isa)).kernel;
}

Isa dense_attention_active_isa() {
  static const Isa isa = isa_select(kDenseAttentionKernels, active_isa_flags()).isa;
  return isa;
}

namespace {

template <typename Element>
void scores_impl(Isa isa, const float* q, uint32_t queries, uint32_t head_dim, const Element* keys, uint32_t len,
                 uint32_t capacity, float scale, float* scores, size_t stride) {
  const DenseAttentionUkernels& uk = dense_attention_ukernels(isa);
  const uint32_t blocked = capacity / kKvKeyBlock * kKvKeyBlock;
  uint32_t blocks = std::min(len, blocked) / kKvKeyBlock;
  // A partial last block inside the blocked storage is scored whole (its rows past len are
  // other positions' or unwritten, and their scores, within the row's capacity, go unread):
  // one position in kKvKeyBlock, scored by the scalar tail, was ~3 % of a 2B-4T prefill. A
  // position's score then comes from the block kernel whatever len is.
  if (blocks * kKvKeyBlock < len && (blocks + 1) * kKvKeyBlock <= blocked) ++blocks;
  for (uint32_t q0 = 0; q0 < queries; q0 += kKvMaxQueries) {
    const uint32_t n = std::min(queries - q0, kKvMaxQueries);
    const float* qs = q + static_cast<size_t>(q0) * head_dim;
    float* sc = scores + q0 * stride;
    if constexpr (sizeof(Element) == 2) {
      uk.block_scores_f16(qs, n, head_dim, keys, blocks, scale, sc, stride);
    } else {
      uk.block_scores(qs, n, head_dim, keys, blocks, scale, sc, stride);
    }
    for (uint32_t p = blocks * kKvKeyBlock; p < len; ++p) {
      for (uint32_t j = 0; j < n; ++j) {
        const float* qj = qs + static_cast<size_t>(j) * head_dim;
        float dot = 0.0f;
        for (uint32_t i = 0; i < head_dim; ++i) {
          dot += qj[i] * dense_attention_widen(keys[kv_key_index(p, i, head_dim, capacity)]);
        }
        sc[j * stride + p] = dot * scale;
      }
    }
  }
}

template <typename Element>
void values_impl(Isa isa, const float* probs, size_t p_stride, uint32_t queries, const Element* values,
                 uint32_t head_dim, uint32_t len, float* out) {
  const DenseAttentionUkernels& uk = dense_attention_ukernels(isa);
  for (uint32_t q0 = 0; q0 < queries; q0 += kKvMaxQueries) {
    const uint32_t n = std::min(queries - q0, kKvMaxQueries);
    const float* pr = probs + q0 * p_stride;
    float* o = out + static_cast<size_t>(q0) * head_dim;
    uint32_t done;
    if constexpr (sizeof(Element) == 2) {
      done = uk.value_columns_f16(pr, p_stride, n, values, head_dim, len, o);
    } else {
      done = uk.value_columns(pr, p_stride, n, values, head_dim, len, o);
    }
    for (uint32_t j = 0; j < n; ++j) {
      for (uint32_t i = done; i < head_dim; ++i) {
        float acc = 0.0f;
        for (uint32_t p = 0; p < len; ++p) {
          acc += pr[j * p_stride + p] * dense_attention_widen(values[static_cast<size_t>(p) * head_dim + i]);
        }
        o[static_cast<size_t>(j) * head_dim + i] = acc;
      }
    }
  }
}

}  // namespace

void dense_attention_scores(Isa isa, const float* q, uint32_t queries, uint32_t head_dim, const float* keys,
                            uint32_t len, uint32_t capacity, float scale, float* scores, size_t stride) {
  scores_impl(isa, q, queries, head_dim, keys, len, capacity, scale, scores, stride);
}
void dense_attention_values(Isa isa, const float* probs, size_t p_stride, uint32_t queries, const float* values,
                            uint32_t head_dim, uint32_t len, float* out) {
  values_impl(isa, probs, p_stride, queries, values, head_dim, len, out);
}
void dense_attention_scores_f16(Isa isa, const float* q, uint32_t queries, uint32_t head_dim, const uint16_t* keys,
                                uint32_t len, uint32_t capacity, float scale, float* scores, size_t stride) {
  scores_impl(isa, q, queries, head_dim, keys, len, capacity, scale, scores, stride);
}
void dense_attention_values_f16(Isa isa, const float* probs, size_t p_stride, uint32_t queries, const uint16_t* values,
                                uint32_t head_dim, uint32_t len, float* out) {
  values_impl(isa, probs, p_stride, queries, values, head_dim, len, out);
}

}  // namespace tern
