// Integer q8/q4 GEMV, AVX2. Q8: PMADDUBSW needs one unsigned operand, so the weight's sign
// moves onto the activation (|w| * sign(x, w)); pairs reach at most 2 * 128 * 127 and do not
// saturate. Q4: the stored nibbles (v + 8, 0..15) are already unsigned; the low and high
// nibbles of 32 bytes meet the group's even and odd activations. The row loop is
// dense_gemv_i8_x86_impl.h.
#include <immintrin.h>

#include "kernels/dense_gemv_i8_x86_impl.h"

namespace tern {
namespace {

struct Avx2Dot {
  static constexpr int32_t kQ8Offset = 0;
  static __m256i q4_unpacked(__m256i dot, __m256i lo, __m256i hi, __m256i xe, __m256i xo) {
    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xe), _mm256_maddubs_epi16(hi, xo));
    return _mm256_add_epi32(dot, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
  }
  static __m256i q4(__m256i dot, __m256i w, __m256i xe, __m256i xo) {
    return q4_unpacked(dot, dense_i8_x86::q4_low<Avx2Dot>(w), dense_i8_x86::q4_high<Avx2Dot>(w), xe, xo);
  }
  static __m256i q8(__m256i dot, __m256i w, __m256i x) {
    const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
    return _mm256_add_epi32(dot, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
  }
};

}  // namespace

void dense_gemv_i8__avx2(const DenseMatrix& m, const DenseActivationsI8& x, float* y, size_t row_begin,
                         size_t row_end) {
  dense_i8_x86::gemv<Avx2Dot>(m, x, y, row_begin, row_end);
}

void dense_gemv_i8_tokens__avx2(const DenseMatrix& m, const DenseActivationsI8* x, size_t n, float* const* y,
                                size_t row_begin, size_t row_end) {
  dense_i8_x86::gemv_tokens<Avx2Dot>(m, x, n, y, row_begin, row_end);
}

}  // namespace tern
