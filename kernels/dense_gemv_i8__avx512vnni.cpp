// Integer q8/q4 GEMV with VPDPBUSD (AVX-512 VNNI, 256-bit EVEX forms): one instruction per
// operand pair instead of AVX2's PMADDUBSW + PMADDWD + add. VPDPBUSD wants an unsigned first
// operand: Q4's stored nibbles (v + 8) already are, and Q8 flips the sign bit
// (w ^ 0x80 = w + 128); both offsets come off once per group through Σq. 256-bit, not 512:
// Zen 4 issues a zmm VPDPBUSD as two halves, and the AVX2 kernel's activation order (32
// even / 32 odd columns for Q4) stays valid. The row loop is dense_gemv_i8_x86_impl.h.
#include <immintrin.h>

#include "kernels/dense_gemv_i8_x86_impl.h"

namespace tern {
namespace {

struct VnniDot {
  static constexpr int32_t kQ8Offset = 128;
  static __m256i q4_unpacked(__m256i dot, __m256i lo, __m256i hi, __m256i xe, __m256i xo) {
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(dot, lo, xe), hi, xo);
  }
  static __m256i q4(__m256i dot, __m256i w, __m256i xe, __m256i xo) {
    return q4_unpacked(dot, dense_i8_x86::q4_low<VnniDot>(w), dense_i8_x86::q4_high<VnniDot>(w), xe, xo);
  }
  static __m256i q8(__m256i dot, __m256i w, __m256i x) {
    return _mm256_dpbusd_epi32(dot, _mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80))), x);
  }
};

}  // namespace

void dense_gemv_i8__avx512vnni(const DenseMatrix& m, const DenseActivationsI8& x, float* y, size_t row_begin,
                               size_t row_end) {
  dense_i8_x86::gemv<VnniDot>(m, x, y, row_begin, row_end);
}

void dense_gemv_i8_tokens__avx512vnni(const DenseMatrix& m, const DenseActivationsI8* x, size_t n, float* const* y,
                                      size_t row_begin, size_t row_end) {
  dense_i8_x86::gemv_tokens<VnniDot>(m, x, n, y, row_begin, row_end);
}

}  // namespace tern
