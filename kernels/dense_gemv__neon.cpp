// Dense GEMV, AArch64 NEON: f16 via FCVTL, bf16 by a 16-bit shift, int8 via SXTL.
// Vectors are 8 floats (two q-registers) so an int8 load fills a whole D register.
#include <arm_neon.h>

#include "kernels/dense_gemv_impl.h"
#include "kernels/dense_ukernels.h"

namespace tern {
namespace {

struct Neon {
  using Vec = float32x4x2_t;
  static constexpr size_t kWidth = 8;
  static Vec zero() { return {{vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}}; }
  static Vec load(const float* p) { return {{vld1q_f32(p), vld1q_f32(p + 4)}}; }
  static Vec fma(Vec a, Vec b, Vec acc) {
    return {{vfmaq_f32(acc.val[0], a.val[0], b.val[0]), vfmaq_f32(acc.val[1], a.val[1], b.val[1])}};
  }
  static Vec set1(float v) { return {{vdupq_n_f32(v), vdupq_n_f32(v)}}; }
  static float hsum(Vec v) { return vaddvq_f32(vaddq_f32(v.val[0], v.val[1])); }
  static Vec load(const uint16_t* p) {
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(p));
    return {{vcvt_f32_f16(vget_low_f16(h)), vcvt_high_f32_f16(h)}};
  }
  static Vec bf16(const uint16_t* p) {
    const uint16x8_t h = vld1q_u16(p);
    return {{vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)), vreinterpretq_f32_u32(vshll_high_n_u16(h, 16))}};
  }
  static Vec q8(const int8_t* p) {
    const int16x8_t w = vmovl_s8(vld1_s8(p));
    return {{vcvtq_f32_s32(vmovl_s16(vget_low_s16(w))), vcvtq_f32_s32(vmovl_high_s16(w))}};
  }
};

}  // namespace

bool dense_gemv__neon(const DenseMatrix& m, const float* x, float* y, size_t row_begin, size_t row_end) {
  return dense_impl::gemv<Neon>(m, x, y, row_begin, row_end, true);
}

}  // namespace tern
