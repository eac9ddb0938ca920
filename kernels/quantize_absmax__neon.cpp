// Per-token absmax int8 quantization, AArch64 NEON: FCVTNS rounds half to even,
// SQXTN narrows the clamped values.
#include <arm_neon.h>

#include "kernels/quantize_ukernels.h"

namespace tern {
namespace {

struct Neon {
  static float abs_max(const float* x, size_t n, size_t* end) {
    float32x4_t vmax = vdupq_n_f32(0.0f);
    size_t i = 0;
    for (; i + 4 <= n; i += 4) vmax = vmaxq_f32(vmax, vabsq_f32(vld1q_f32(x + i)));
    *end = i;
    return vmaxvq_f32(vmax);
  }
  static int32_t convert(const float* x, size_t n, float inv, int8_t* q, size_t* end) {
    const float32x4_t vinv = vdupq_n_f32(inv);
    const int32x4_t lo = vdupq_n_s32(-127), hi = vdupq_n_s32(127);
    int32x4_t vsum = vdupq_n_s32(0);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      int32x4_t a = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(x + i), vinv));
      int32x4_t b = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(x + i + 4), vinv));
      a = vminq_s32(vmaxq_s32(a, lo), hi);
      b = vminq_s32(vmaxq_s32(b, lo), hi);
      vsum = vaddq_s32(vsum, vaddq_s32(a, b));
      vst1_s8(q + i, vqmovn_s16(vcombine_s16(vqmovn_s32(a), vqmovn_s32(b))));
    }
    *end = i;
    return vaddvq_s32(vsum);
  }
};

}  // namespace

void quantize_row_absmax_int8__neon(const float* x, size_t n, int8_t* q, float* scale, int32_t* sum) {
  quantize_row_absmax<Neon>(x, n, q, scale, sum);
}

}  // namespace tern
