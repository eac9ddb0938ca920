// NEON mixed-precision attention loops (aarch64 baseline Advanced SIMD).
#include <arm_neon.h>

#include <cstring>

#include "kernels/kv_ukernels.h"
#include "kernels/kv_value_rows_impl.h"

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

template <uint32_t B, int Q>
void code_row_dots_t(const float* qs, const float* bias, const uint8_t* rows, size_t row_bytes, uint32_t tokens,
                     uint32_t head_dim, float scale, float* scores, size_t stride) {
  const uint32_t body = head_dim & ~7u;
  for (uint32_t t = 0; t < tokens; ++t) {
    const uint8_t* row = rows + t * row_bytes;
    float32x4_t acc0[Q], acc1[Q];
    for (int i = 0; i < Q; ++i) acc0[i] = acc1[i] = vdupq_n_f32(0.0f);
    uint32_t c = 0;
    for (; c < body; c += 8) {
      float32x4_t lo, hi;
      codes8<B>(row, c, &lo, &hi);
      for (int i = 0; i < Q; ++i) {
        acc0[i] = vfmaq_f32(acc0[i], vld1q_f32(qs + i * head_dim + c), lo);
        acc1[i] = vfmaq_f32(acc1[i], vld1q_f32(qs + i * head_dim + c + 4), hi);
      }
    }
    for (int i = 0; i < Q; ++i) {
      float s = vaddvq_f32(vaddq_f32(acc0[i], acc1[i]));
      for (uint32_t k = c; k < head_dim; ++k) s += qs[i * head_dim + k] * static_cast<float>(kv_code_at(row, k, B));
      scores[i * stride + t] = scale * (bias[i] + s);
    }
  }
}

// The register-held chunks of kv_value_rows_accumulate: 16 or 8 columns of a value group.
struct ValueChunks {
  static constexpr uint32_t kWide = 16, kNarrow = 8;
  template <uint32_t B, int Q, uint32_t Columns>
  static void run(const KvValueRows& v, uint32_t g, uint32_t c, bool first, KvValueBias bias, float* out) {
    constexpr int Z = Columns / 4;
    float32x4_t acc[Q][Z];
    for (int i = 0; i < Q; ++i)
      for (int z = 0; z < Z; ++z) acc[i][z] = vld1q_f32(out + i * v.head_dim + c + 4 * z);
    for (uint32_t t = 0; t < v.tokens; ++t) {
      const uint8_t* row = v.rows + t * v.row_bytes;
      uint16_t mh, sh;
      kv_value_group_params(row, g, &mh, &sh);
      const float st = f16_to_f32(sh);
      const uint8_t* codes_row = row + 4 * static_cast<size_t>(v.groups);
      float32x4_t codes[Z];
      for (int z = 0; z < Z; z += 2) codes8<B>(codes_row, c + 4 * z, &codes[z], &codes[z + 1]);
      for (int i = 0; i < Q; ++i) {
        const float pt = v.p[i * v.p_stride + t];
        const float a = pt * st;
        for (int z = 0; z < Z; ++z) acc[i][z] = vfmaq_n_f32(acc[i][z], codes[z], a);
        if (first) bias[i][g] += pt * f16_to_f32(mh);
      }
    }
    for (int i = 0; i < Q; ++i)
      for (int z = 0; z < Z; ++z) vst1q_f32(out + i * v.head_dim + c + 4 * z, acc[i][z]);
  }
};

template <uint32_t B>
void code_row_dots_b(const float* qs, const float* bias, uint32_t queries, const uint8_t* rows, size_t row_bytes,
                     uint32_t tokens, uint32_t head_dim, float scale, float* scores, size_t stride) {
  switch (queries) {
    case 1: return code_row_dots_t<B, 1>(qs, bias, rows, row_bytes, tokens, head_dim, scale, scores, stride);
    case 2: return code_row_dots_t<B, 2>(qs, bias, rows, row_bytes, tokens, head_dim, scale, scores, stride);
    case 3: return code_row_dots_t<B, 3>(qs, bias, rows, row_bytes, tokens, head_dim, scale, scores, stride);
    default: return code_row_dots_t<B, 4>(qs, bias, rows, row_bytes, tokens, head_dim, scale, scores, stride);
  }
}

void code_row_dots(const float* qs, const float* bias, uint32_t queries, const uint8_t* rows, size_t row_bytes,
                   uint32_t tokens, uint32_t head_dim, uint32_t bits, float scale, float* scores, size_t stride) {
  switch (bits) {
    case 2: return code_row_dots_b<2>(qs, bias, queries, rows, row_bytes, tokens, head_dim, scale, scores, stride);
    case 3: return code_row_dots_b<3>(qs, bias, queries, rows, row_bytes, tokens, head_dim, scale, scores, stride);
    case 4: return code_row_dots_b<4>(qs, bias, queries, rows, row_bytes, tokens, head_dim, scale, scores, stride);
    default: return code_row_dots_b<8>(qs, bias, queries, rows, row_bytes, tokens, head_dim, scale, scores, stride);
  }
}

template <uint32_t B>
void value_rows_accumulate_b(const float* p, size_t p_stride, uint32_t queries, const uint8_t* rows, uint32_t tokens,
                             uint32_t head_dim, uint32_t group, float* out) {
  switch (queries) {
    case 1: return kv_value_rows_accumulate<ValueChunks, B, 1>(p, p_stride, rows, tokens, head_dim, group, out);
    case 2: return kv_value_rows_accumulate<ValueChunks, B, 2>(p, p_stride, rows, tokens, head_dim, group, out);
    case 3: return kv_value_rows_accumulate<ValueChunks, B, 3>(p, p_stride, rows, tokens, head_dim, group, out);
    default: return kv_value_rows_accumulate<ValueChunks, B, 4>(p, p_stride, rows, tokens, head_dim, group, out);
  }
}

void value_rows_accumulate(const float* p, size_t p_stride, uint32_t queries, const uint8_t* rows, uint32_t tokens,
                           uint32_t head_dim, uint32_t group, uint32_t bits, float* out) {
  switch (bits) {
    case 2: return value_rows_accumulate_b<2>(p, p_stride, queries, rows, tokens, head_dim, group, out);
    case 3: return value_rows_accumulate_b<3>(p, p_stride, queries, rows, tokens, head_dim, group, out);
    case 4: return value_rows_accumulate_b<4>(p, p_stride, queries, rows, tokens, head_dim, group, out);
    default: return value_rows_accumulate_b<8>(p, p_stride, queries, rows, tokens, head_dim, group, out);
  }
}


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
    for (; c < head_dim; ++c) s += q[c] * f16_to_f32(k[c]);
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
    for (; c < head_dim; ++c) out[c] += p[t] * f16_to_f32(v[c]);
  }
}

void halves_to_floats(const uint16_t* h, uint32_t n, float* out) {
  uint32_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(out + i, load_f16x4(h + i));
  for (; i < n; ++i) out[i] = f16_to_f32(h[i]);
}

}  // namespace

const KvAttentionUkernels kv_attention__neon = {
    code_row_dots,        value_rows_accumulate, exact_scores_f32, exact_scores_f16,
    exact_accumulate_f32, exact_accumulate_f16,  halves_to_floats};

}  // namespace tern
