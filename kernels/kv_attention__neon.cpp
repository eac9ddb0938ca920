// NEON mixed-precision attention loops (aarch64 baseline Advanced SIMD).
#include <cstring>

#include "kernels/f32_vec_neon.h"
#include "kernels/kv_attention_impl.h"

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

struct Neon : F32x4 {
  template <uint32_t B>
  static void codes(const uint8_t* row, uint32_t c, Vec* v) {
    codes8<B>(row, c, v, v + 1);
  }

  template <uint32_t B, uint32_t Q>
  static uint32_t row_dots(const float* qs, const uint8_t* row, uint32_t head_dim, float* sums) {
    const uint32_t body = head_dim & ~7u;
    float32x4_t acc0[Q], acc1[Q];
    for (uint32_t i = 0; i < Q; ++i) acc0[i] = acc1[i] = vdupq_n_f32(0.0f);
    uint32_t c = 0;
    for (; c < body; c += 8) {
      float32x4_t lo, hi;
      codes8<B>(row, c, &lo, &hi);
      for (uint32_t i = 0; i < Q; ++i) {
        acc0[i] = vfmaq_f32(acc0[i], vld1q_f32(qs + i * head_dim + c), lo);
        acc1[i] = vfmaq_f32(acc1[i], vld1q_f32(qs + i * head_dim + c + 4), hi);
      }
    }
    for (uint32_t i = 0; i < Q; ++i) sums[i] = vaddvq_f32(vaddq_f32(acc0[i], acc1[i]));
    return c;
  }
};

}  // namespace

const KvAttentionUkernels kv_attention__neon = kv_attention_impl::ukernels<Neon>();

}  // namespace tern
