// Segment drivers for mixed-precision attention; the inner loops are per ISA.
#include "kernels/kv_attention.h"

#include <cmath>
#include <cstring>

#include "kernels/dense_matmul.h"
#include "kernels/kv_ukernels.h"

namespace tern {

void kv_segment_scores_multi(KvIsa isa, const KvSegment& seg, const KvQuantLayout& layout, uint32_t head_dim,
                             const float* q, uint32_t queries, float scale, float* scores, size_t stride) {
  if (seg.tokens == 0) return;
  const KvAttentionUkernels& uk = kv_attention_ukernels(isa);
  if (seg.kind != KvSegmentKind::Quantized) {
    for (uint32_t i = 0; i < queries; ++i) {
      const float* qi = q + static_cast<size_t>(i) * head_dim;
      if (seg.kind == KvSegmentKind::ExactF32) {
        uk.exact_scores_f32(qi, static_cast<const float*>(seg.keys), seg.tokens, head_dim, scale, scores + i * stride);
      } else {
        uk.exact_scores_f16(qi, static_cast<const uint16_t*>(seg.keys), seg.tokens, head_dim, scale,
                            scores + i * stride);
      }
    }
    return;
  }
  // q·(min + step*code) = Σ q*min + Σ (q*step)*code: fold the block's channel parameters
  // into each query once, then the per-token loop touches only codes.
  const uint8_t* block = static_cast<const uint8_t*>(seg.keys);
  float qs[kKvMaxQueries * kKvMaxHeadDim], bias[kKvMaxQueries], mins[kKvMaxHeadDim], steps[kKvMaxHeadDim];
  for (uint32_t c = 0; c < head_dim; ++c) {
    uint16_t mh, sh;
    std::memcpy(&mh, block + 2 * c, 2);
    std::memcpy(&sh, block + 2 * (head_dim + c), 2);
    mins[c] = kv_half_to_float(mh);
    steps[c] = kv_half_to_float(sh);
  }
  for (uint32_t q0 = 0; q0 < queries; q0 += kKvMaxQueries) {
    const uint32_t n = queries - q0 < kKvMaxQueries ? queries - q0 : kKvMaxQueries;
    for (uint32_t i = 0; i < n; ++i) {
      const float* qi = q + static_cast<size_t>(q0 + i) * head_dim;
      float b = 0.0f;
      for (uint32_t c = 0; c < head_dim; ++c) {
        b += qi[c] * mins[c];
        qs[i * head_dim + c] = qi[c] * steps[c];
      }
      bias[i] = b;
    }
    uk.code_row_dots(qs, bias, n, block + 4 * static_cast<size_t>(head_dim), kv_packed_bytes(layout.key_bits, head_dim),
                     seg.tokens, head_dim, layout.key_bits, scale, scores + q0 * stride, stride);
  }
}

void kv_segment_accumulate_multi(KvIsa isa, const KvSegment& seg, const KvQuantLayout& layout, uint32_t head_dim,
                                 const float* p, size_t p_stride, uint32_t queries, float* out) {
  if (seg.tokens == 0) return;
  const KvAttentionUkernels& uk = kv_attention_ukernels(isa);
  if (seg.kind != KvSegmentKind::Quantized) {
    for (uint32_t i = 0; i < queries; ++i) {
      float* oi = out + static_cast<size_t>(i) * head_dim;
      if (seg.kind == KvSegmentKind::ExactF32) {
        uk.exact_accumulate_f32(p + i * p_stride, static_cast<const float*>(seg.values), seg.tokens, head_dim, oi);
      } else {
        uk.exact_accumulate_f16(p + i * p_stride, static_cast<const uint16_t*>(seg.values), seg.tokens, head_dim, oi);
      }
    }
    return;
  }
  for (uint32_t q0 = 0; q0 < queries; q0 += kKvMaxQueries) {
    const uint32_t n = queries - q0 < kKvMaxQueries ? queries - q0 : kKvMaxQueries;
    uk.value_rows_accumulate(p + q0 * p_stride, p_stride, n, static_cast<const uint8_t*>(seg.values), seg.tokens,
                             head_dim, layout.value_group, layout.value_bits, out + static_cast<size_t>(q0) * head_dim);
  }
}

void kv_segment_scores(KvIsa isa, const KvSegment& seg, const KvQuantLayout& layout, uint32_t head_dim,
                       const float* q, float scale, float* scores) {
  kv_segment_scores_multi(isa, seg, layout, head_dim, q, 1, scale, scores, 0);
}

void kv_segment_accumulate(KvIsa isa, const KvSegment& seg, const KvQuantLayout& layout, uint32_t head_dim,
                           const float* p, float* out) {
  kv_segment_accumulate_multi(isa, seg, layout, head_dim, p, 0, 1, out);
}

void kv_softmax(float* x, size_t n) {
  if (n == 0) return;
  float max_score = x[0];
  for (size_t i = 1; i < n; ++i) max_score = x[i] > max_score ? x[i] : max_score;
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_score);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (size_t i = 0; i < n; ++i) x[i] *= inv;
}

void kv_attend(KvIsa isa, const KvSegment* segs, size_t seg_count, const KvQuantLayout& layout, uint32_t head_dim,
               const float* q, float scale, float* scores, float* out) {
  size_t total = 0;
  for (size_t i = 0; i < seg_count; ++i) {
    kv_segment_scores(isa, segs[i], layout, head_dim, q, scale, scores + total);
    total += segs[i].tokens;
  }
  kv_softmax(scores, total);
  std::memset(out, 0, sizeof(float) * head_dim);
  total = 0;
  for (size_t i = 0; i < seg_count; ++i) {
    kv_segment_accumulate(isa, segs[i], layout, head_dim, scores + total, out);
    total += segs[i].tokens;
  }
}

}  // namespace tern
