// NEON mixed-precision attention loops (aarch64 baseline Advanced SIMD).
#include <arm_neon.h>

#include <cstring>

#include "kernels/dense_matmul.h"
#include "kernels/kv_ukernels.h"

namespace tern {
namespace {

// Codes c..c+7 of a packed row (c a multiple of 8) as two float vectors; reads up to 8 bytes.
template <uint32_t B>
inline void codes8(const uint8_t* row, uint32_t c, float32x4_t* lo, float32x4_t* hi) {
  const uint8_t* p = row + (c / 8) * B;
  if (B == 8) {
    const uint16x8_t w = vmovl_u8(vld1_u8(p));
    *lo = vcvtq_f32_u32(vmovl_u16(vget_low_u16(w)));
    *hi = vcvtq_f32_u32(vmovl_u16(vget_high_u16(w)));
  } else {
    uint32_t word;
    std::memcpy(&word, p, 4);
    const uint32x4_t v = vdupq_n_u32(word), mask = vdupq_n_u32((1u << B) - 1);
    const int32_t s = static_cast<int32_t>(B);
    const int32_t shifts_lo[4] = {0, -s, -2 * s, -3 * s};
    const int32_t shifts_hi[4] = {-4 * s, -5 * s, -6 * s, -7 * s};
    *lo = vcvtq_f32_u32(vandq_u32(vshlq_u32(v, vld1q_s32(shifts_lo)), mask));
    *hi = vcvtq_f32_u32(vandq_u32(vshlq_u32(v, vld1q_s32(shifts_hi)), mask));
  }
}

template <uint32_t B>
void code_row_dots_t(const float* qs, float bias, const uint8_t* rows, size_t row_bytes, uint32_t tokens,
                     uint32_t head_dim, float scale, float* scores) {
  const uint32_t body = head_dim & ~7u;
  for (uint32_t t = 0; t < tokens; ++t) {
    const uint8_t* row = rows + t * row_bytes;
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    uint32_t c = 0;
    for (; c < body; c += 8) {
      float32x4_t lo, hi;
      codes8<B>(row, c, &lo, &hi);
      acc0 = vfmaq_f32(acc0, vld1q_f32(qs + c), lo);
      acc1 = vfmaq_f32(acc1, vld1q_f32(qs + c + 4), hi);
    }
    float acc = vaddvq_f32(vaddq_f32(acc0, acc1));
    for (; c < head_dim; ++c) acc += qs[c] * static_cast<float>(kv_code_at(row, c, B));
    scores[t] = scale * (bias + acc);
  }
}

void code_row_dots(const float* qs, float bias, const uint8_t* rows, size_t row_bytes, uint32_t tokens,
                   uint32_t head_dim, uint32_t bits, float scale, float* scores) {
  switch (bits) {
    case 2: return code_row_dots_t<2>(qs, bias, rows, row_bytes, tokens, head_dim, scale, scores);
    case 3: return code_row_dots_t<3>(qs, bias, rows, row_bytes, tokens, head_dim, scale, scores);
    case 4: return code_row_dots_t<4>(qs, bias, rows, row_bytes, tokens, head_dim, scale, scores);
    default: return code_row_dots_t<8>(qs, bias, rows, row_bytes, tokens, head_dim, scale, scores);
  }
}

template <uint32_t B>
void value_rows_accumulate_t(const float* p, const uint8_t* rows, uint32_t tokens, uint32_t head_dim, uint32_t group,
                             float* out) {
  const uint32_t groups = kv_value_groups(head_dim, group);
  const size_t row_bytes = kv_value_row_bytes(B, head_dim, group);
  // Σ_t p*min per group is added once at the end instead of once per token and chunk.
  float bias[kKvMaxHeadDim / 8] = {};
  for (uint32_t t = 0; t < tokens; ++t) {
    const uint8_t* row = rows + t * row_bytes;
    const uint8_t* codes = row + 4 * static_cast<size_t>(groups);
    for (uint32_t g = 0; g < groups; ++g) {
      uint16_t mh, sh;
      std::memcpy(&mh, row + 4 * g, 2);
      std::memcpy(&sh, row + 4 * g + 2, 2);
      const float a = p[t] * kv_half_to_float(sh), b = p[t] * kv_half_to_float(mh);
      const uint32_t end = (g + 1) * group < head_dim ? (g + 1) * group : head_dim;
      uint32_t c = g * group;
      for (; c + 8 <= end; c += 8) {
        float32x4_t lo, hi;
        codes8<B>(codes, c, &lo, &hi);
        vst1q_f32(out + c, vfmaq_n_f32(vld1q_f32(out + c), lo, a));
        vst1q_f32(out + c + 4, vfmaq_n_f32(vld1q_f32(out + c + 4), hi, a));
      }
      for (; c < end; ++c) out[c] += a * static_cast<float>(kv_code_at(codes, c, B));
      bias[g] += b;
    }
  }
  for (uint32_t g = 0; g < groups; ++g) {
    const uint32_t end = (g + 1) * group < head_dim ? (g + 1) * group : head_dim;
    for (uint32_t c = g * group; c < end; ++c) out[c] += bias[g];
  }
}

void value_rows_accumulate(const float* p, const uint8_t* rows, uint32_t tokens, uint32_t head_dim, uint32_t group,
                           uint32_t bits, float* out) {
  switch (bits) {
    case 2: return value_rows_accumulate_t<2>(p, rows, tokens, head_dim, group, out);
    case 3: return value_rows_accumulate_t<3>(p, rows, tokens, head_dim, group, out);
    case 4: return value_rows_accumulate_t<4>(p, rows, tokens, head_dim, group, out);
    default: return value_rows_accumulate_t<8>(p, rows, tokens, head_dim, group, out);
  }
}

inline float32x4_t load_f16x4(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }

void exact_scores_f32(const float* q, const float* keys, uint32_t tokens, uint32_t head_dim, float scale,
                      float* scores) {
  for (uint32_t t = 0; t < tokens; ++t) {
    const float* k = keys + static_cast<size_t>(t) * head_dim;
    float32x4_t acc = vdupq_n_f32(0.0f);
    uint32_t c = 0;
    for (; c + 4 <= head_dim; c += 4) acc = vfmaq_f32(acc, vld1q_f32(q + c), vld1q_f32(k + c));
    float s = vaddvq_f32(acc);
    for (; c < head_dim; ++c) s += q[c] * k[c];
    scores[t] = scale * s;
  }
}

void exact_scores_f16(const float* q, const uint16_t* keys, uint32_t tokens, uint32_t head_dim, float scale,
                      float* scores) {
  for (uint32_t t = 0; t < tokens; ++t) {
    const uint16_t* k = keys + static_cast<size_t>(t) * head_dim;
    float32x4_t acc = vdupq_n_f32(0.0f);
    uint32_t c = 0;
    for (; c + 4 <= head_dim; c += 4) acc = vfmaq_f32(acc, vld1q_f32(q + c), load_f16x4(k + c));
    float s = vaddvq_f32(acc);
    for (; c < head_dim; ++c) s += q[c] * kv_half_to_float(k[c]);
    scores[t] = scale * s;
  }
}

void exact_accumulate_f32(const float* p, const float* values, uint32_t tokens, uint32_t head_dim, float* out) {
  for (uint32_t t = 0; t < tokens; ++t) {
    const float* v = values + static_cast<size_t>(t) * head_dim;
    uint32_t c = 0;
    for (; c + 4 <= head_dim; c += 4) vst1q_f32(out + c, vfmaq_n_f32(vld1q_f32(out + c), vld1q_f32(v + c), p[t]));
    for (; c < head_dim; ++c) out[c] += p[t] * v[c];
  }
}

void exact_accumulate_f16(const float* p, const uint16_t* values, uint32_t tokens, uint32_t head_dim, float* out) {
  for (uint32_t t = 0; t < tokens; ++t) {
    const uint16_t* v = values + static_cast<size_t>(t) * head_dim;
    uint32_t c = 0;
    for (; c + 4 <= head_dim; c += 4) vst1q_f32(out + c, vfmaq_n_f32(vld1q_f32(out + c), load_f16x4(v + c), p[t]));
    for (; c < head_dim; ++c) out[c] += p[t] * kv_half_to_float(v[c]);
  }
}

}  // namespace

const KvAttentionUkernels kv_attention__neon = {code_row_dots,    value_rows_accumulate, exact_scores_f32,
                                                exact_scores_f16, exact_accumulate_f32,  exact_accumulate_f16};

}  // namespace tern
