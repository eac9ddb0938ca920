// Segment drivers for mixed-precision attention; the inner loops are per ISA.
#include "kernels/kv_attention.h"

#include <cmath>
#include <cstring>

#include "kernels/kv_ukernels.h"

namespace tern {

namespace {

// qs[i][c] = q_i[c] * step[c], bias[i] = Σ_c q_i[c] * min[c] in channel order. The N queries'
// sums advance side by side: one query's 128-long chain of dependent adds was ~9 % of a q4
// decode at 2k positions; each sum's order (and so its value) is unchanged.
template <uint32_t N>
void fold_channels(const float* q, const float* mins, const float* steps, uint32_t head_dim, float* qs, float* bias) {
  float b[N] = {};
  for (uint32_t c = 0; c < head_dim; ++c) {
    for (uint32_t i = 0; i < N; ++i) {
      const float qc = q[static_cast<size_t>(i) * head_dim + c];
      b[i] += qc * mins[c];
      qs[i * head_dim + c] = qc * steps[c];
    }
  }
  for (uint32_t i = 0; i < N; ++i) bias[i] = b[i];
}

}  // namespace

void kv_segment_scores_multi(Isa isa, const KvSegment& seg, const KvQuantLayout& layout, uint32_t head_dim,
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
  // The block starts with head_dim f16 minimums, then head_dim f16 steps (2-byte aligned).
  uk.halves_to_floats(reinterpret_cast<const uint16_t*>(block), head_dim, mins);
  uk.halves_to_floats(reinterpret_cast<const uint16_t*>(block + 2 * static_cast<size_t>(head_dim)), head_dim, steps);
  for (uint32_t q0 = 0; q0 < queries; q0 += kKvMaxQueries) {
    const uint32_t n = queries - q0 < kKvMaxQueries ? queries - q0 : kKvMaxQueries;
    const float* qg = q + static_cast<size_t>(q0) * head_dim;
    switch (n) {
      case 1: fold_channels<1>(qg, mins, steps, head_dim, qs, bias); break;
      case 2: fold_channels<2>(qg, mins, steps, head_dim, qs, bias); break;
      case 3: fold_channels<3>(qg, mins, steps, head_dim, qs, bias); break;
      default: fold_channels<4>(qg, mins, steps, head_dim, qs, bias); break;
    }
    uk.code_row_dots(qs, bias, n, block + 4 * static_cast<size_t>(head_dim), kv_packed_bytes(layout.key_bits, head_dim),
                     seg.tokens, head_dim, layout.key_bits, scale, scores + q0 * stride, stride);
  }
}

void kv_segment_accumulate_multi(Isa isa, const KvSegment& seg, const KvQuantLayout& layout, uint32_t head_dim,
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

void kv_segment_scores(Isa isa, const KvSegment& seg, const KvQuantLayout& layout, uint32_t head_dim, const float* q,
                       float scale, float* scores) {
  kv_segment_scores_multi(isa, seg, layout, head_dim, q, 1, scale, scores, 0);
}

void kv_segment_accumulate(Isa isa, const KvSegment& seg, const KvQuantLayout& layout, uint32_t head_dim,
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

void kv_attend(Isa isa, const KvSegment* segs, size_t seg_count, const KvQuantLayout& layout, uint32_t head_dim,
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
