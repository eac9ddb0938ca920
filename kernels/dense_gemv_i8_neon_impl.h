// The integer q8/q4 GEMV loop shared by the two AArch64 translation units; each includes
// this with its own dot-product traits `D` (in that file's anonymous namespace, so each
// instantiation carries only that file's ISA flags):
//   static int32x4_t q8(int32x4_t acc, int8x16_t w, int8x16_t x)   acc += 16 products
//   static int32x4_t q4(int32x4_t acc, int8x16_t lo, int8x16_t hi, int8x16_t xe, int8x16_t xo)
// Four rows share each activation load; every group's dot product is exact in int32 and
// scaled once (see dense_gemv_i8 in dense_matmul.h). Q4 nibbles (v + 8) meet the group's
// even (low nibble) and odd (high nibble) activations; the +8 comes off per group through
// the activation sum, placed in lane 0 of the accumulator.
#pragma once

#include <arm_neon.h>

#include "kernels/dense_ukernels.h"

namespace tern {
namespace dense_i8_neon {

constexpr size_t kRows = 4;

template <typename D, size_t N, bool Q4>
void rows(const DenseMatrix& m, const DenseActivationsI8& x, float* y, size_t r) {
  const uint8_t* w = static_cast<const uint8_t*>(m.data);
  const size_t row_bytes = Q4 ? m.cols / 2 : m.cols;
  const size_t group_bytes = Q4 ? m.group / 2 : m.group;
  const size_t groups = m.cols / m.group;
  float32x4_t acc[N];
  for (size_t i = 0; i < N; ++i) acc[i] = vdupq_n_f32(0.0f);
  for (size_t g = 0; g < groups; ++g) {
    int32x4_t dot[N];
    const int32x4_t start = vsetq_lane_s32(Q4 ? -8 * x.sums[g] : 0, vdupq_n_s32(0), 0);
    for (size_t i = 0; i < N; ++i) dot[i] = start;
    for (size_t b = g * group_bytes; b < (g + 1) * group_bytes; b += 16) {
      if (Q4) {
        // Bytes b..b+15 of a 32-byte chunk: even activations at 2b - (b % 32), odd 32 later.
        const int8_t* xp = x.q + 2 * (b - b % 32) + b % 32;
        const int8x16_t xe = vld1q_s8(xp), xo = vld1q_s8(xp + 32);
        for (size_t i = 0; i < N; ++i) {
          const uint8x16_t wv = vld1q_u8(w + (r + i) * row_bytes + b);
          dot[i] = D::q4(dot[i], vreinterpretq_s8_u8(vandq_u8(wv, vdupq_n_u8(0x0f))),
                         vreinterpretq_s8_u8(vshrq_n_u8(wv, 4)), xe, xo);
        }
      } else {
        const int8x16_t xv = vld1q_s8(x.q + b);
        for (size_t i = 0; i < N; ++i)
          dot[i] = D::q8(dot[i], vld1q_s8(reinterpret_cast<const int8_t*>(w) + (r + i) * row_bytes + b), xv);
      }
    }
    const float xs = x.scales[g];
    for (size_t i = 0; i < N; ++i)
      acc[i] = vfmaq_n_f32(acc[i], vcvtq_f32_s32(dot[i]), m.scales[(r + i) * groups + g] * xs);
  }
  for (size_t i = 0; i < N; ++i) y[r + i] = vaddvq_f32(acc[i]);
}

template <typename D, bool Q4>
void gemv_type(const DenseMatrix& m, const DenseActivationsI8& x, float* y, size_t r0, size_t r1) {
  size_t r = r0;
  for (; r + kRows <= r1; r += kRows) rows<D, kRows, Q4>(m, x, y, r);
  for (; r < r1; ++r) rows<D, 1, Q4>(m, x, y, r);
}

template <typename D>
void gemv(const DenseMatrix& m, const DenseActivationsI8& x, float* y, size_t r0, size_t r1) {
  if (m.type == DenseType::Q4) return gemv_type<D, true>(m, x, y, r0, r1);
  gemv_type<D, false>(m, x, y, r0, r1);
}

}  // namespace dense_i8_neon
}  // namespace tern
