// Integer q8/q4 GEMV, AArch64 NEON without dot products (Cortex-A72, Raspberry
// Pi 4): SMULL/SMLAL into int16 (q8: two products of at most 127 * 127; q4:
// four of at most 15 * 127), SADALP into int32. Q4 nibbles (v + 8) meet the
// group's even and odd activations; the +8 comes off per group through the
// activation sum.
#include <arm_neon.h>

#include "kernels/dense_ukernels.h"

namespace tern {
namespace {

constexpr size_t kRows = 4;

template <size_t N, bool Q4>
void rows_i8(const DenseMatrix &m, const DenseActivationsI8 &x, float *y, size_t r) {
  const uint8_t *w = static_cast<const uint8_t *>(m.data);
  const size_t row_bytes = Q4 ? m.cols / 2 : m.cols;
  const size_t group_bytes = Q4 ? m.group / 2 : m.group;
  const size_t groups = m.cols / m.group;
  float32x4_t acc[N];
  for (size_t i = 0; i < N; ++i) acc[i] = vdupq_n_f32(0.0f);
  for (size_t g = 0; g < groups; ++g) {
    int32x4_t dot[N];
    const int32x4_t start = Q4 ? vsetq_lane_s32(-8 * x.sums[g], vdupq_n_s32(0), 0) : vdupq_n_s32(0);
    for (size_t i = 0; i < N; ++i) dot[i] = start;
    for (size_t b = g * group_bytes; b < (g + 1) * group_bytes; b += 16) {
      if (Q4) {
        // Bytes b..b+15 of a 32-byte chunk: even activations at 2b - (b % 32),
        // odd 32 later.
        const int8_t *xp = x.q + 2 * (b - b % 32) + b % 32;
        const int8x16_t xe = vld1q_s8(xp), xo = vld1q_s8(xp + 32);
        for (size_t i = 0; i < N; ++i) {
          const uint8x16_t wv = vld1q_u8(w + (r + i) * row_bytes + b);
          const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(wv, vdupq_n_u8(0x0f)));
          const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(wv, 4));
          int16x8_t p = vmull_s8(vget_low_s8(lo), vget_low_s8(xe));
          p = vmlal_high_s8(p, lo, xe);
          p = vmlal_s8(p, vget_low_s8(hi), vget_low_s8(xo));
          p = vmlal_high_s8(p, hi, xo);
          dot[i] = vpadalq_s16(dot[i], p);
        }
      } else {
        const int8x16_t xv = vld1q_s8(x.q + b);
        for (size_t i = 0; i < N; ++i) {
          const int8x16_t wv = vld1q_s8(reinterpret_cast<const int8_t *>(w) + (r + i) * row_bytes + b);
          const int16x8_t p = vmlal_high_s8(vmull_s8(vget_low_s8(wv), vget_low_s8(xv)), wv, xv);
          dot[i] = vpadalq_s16(dot[i], p);
        }
      }
    }
    const float xs = x.scales[g];
    for (size_t i = 0; i < N; ++i)
      acc[i] = vfmaq_n_f32(acc[i], vcvtq_f32_s32(dot[i]), m.scales[(r + i) * groups + g] * xs);
  }
  for (size_t i = 0; i < N; ++i) y[r + i] = vaddvq_f32(acc[i]);
}

template <bool Q4>
void gemv(const DenseMatrix &m, const DenseActivationsI8 &x, float *y, size_t r0, size_t r1) {
  size_t r = r0;
  for (; r + kRows <= r1; r += kRows) rows_i8<kRows, Q4>(m, x, y, r);
  for (; r < r1; ++r) rows_i8<1, Q4>(m, x, y, r);
}

}  // namespace

void dense_gemv_i8__neon(const DenseMatrix &m, const DenseActivationsI8 &x, float *y, size_t row_begin,
                         size_t row_end) {
  if (m.type == DenseType::Q4) return gemv<true>(m, x, y, row_begin, row_end);
  gemv<false>(m, x, y, row_begin, row_end);
}

}  // namespace tern
