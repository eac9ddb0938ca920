// Integer q8/q4 GEMV, AArch64 NEON without dot products (Cortex-A72, Raspberry Pi 4):
// SMULL/SMLAL into int16 (q8: two products of at most 127 * 127; q4: four of at most
// 15 * 127), SADALP into int32. The loop is dense_gemv_i8_neon_impl.h.
#include "kernels/dense_gemv_i8_neon_impl.h"

namespace tern {
namespace {

struct MullPadal {
  static int32x4_t q8(int32x4_t acc, int8x16_t w, int8x16_t x) {
    return vpadalq_s16(acc, vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(x)), w, x));
  }
  static int32x4_t q4(int32x4_t acc, int8x16_t lo, int8x16_t hi, int8x16_t xe, int8x16_t xo) {
    int16x8_t p = vmull_s8(vget_low_s8(lo), vget_low_s8(xe));
    p = vmlal_high_s8(p, lo, xe);
    p = vmlal_s8(p, vget_low_s8(hi), vget_low_s8(xo));
    return vpadalq_s16(acc, vmlal_high_s8(p, hi, xo));
  }
};

}  // namespace

void dense_gemv_i8__neon(const DenseMatrix& m, const DenseActivationsI8& x, float* y, size_t row_begin,
                         size_t row_end) {
  dense_i8_neon::gemv<MullPadal>(m, x, y, row_begin, row_end);
}

}  // namespace tern
