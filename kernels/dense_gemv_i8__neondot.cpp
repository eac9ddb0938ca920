// Integer q8/q4 GEMV, AArch64 with SDOT (Cortex-A76 and later, Raspberry Pi 5): one
// instruction per 16 weight bytes (q8), two per 16 bytes of nibbles (q4; 0..15 fits a
// signed byte). The loop is dense_gemv_i8_neon_impl.h.
#include "kernels/dense_gemv_i8_neon_impl.h"

namespace tern {
namespace {

struct Sdot {
  static int32x4_t q8(int32x4_t acc, int8x16_t w, int8x16_t x) { return vdotq_s32(acc, w, x); }
  static int32x4_t q4(int32x4_t acc, int8x16_t lo, int8x16_t hi, int8x16_t xe, int8x16_t xo) {
    return vdotq_s32(vdotq_s32(acc, lo, xe), hi, xo);
  }
};

}  // namespace

void dense_gemv_i8__neondot(const DenseMatrix& m, const DenseActivationsI8& x, float* y, size_t row_begin,
                            size_t row_end) {
  dense_i8_neon::gemv<Sdot>(m, x, y, row_begin, row_end);
}

}  // namespace tern
