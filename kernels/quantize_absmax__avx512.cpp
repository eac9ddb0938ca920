// Per-token absmax int8 quantization, AVX-512F: VCVTPS2DQ rounds half to even (the
// default MXCSR mode), VPMOVDB narrows the clamped values.
#include <immintrin.h>

#include "kernels/quantize_ukernels.h"

namespace tern {
namespace {

struct Avx512 {
  static float abs_max(const float* x, size_t n, size_t* end) {
    __m512 vmax = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
    *end = i;
    return _mm512_reduce_max_ps(vmax);
  }
  static int32_t convert(const float* x, size_t n, float inv, int8_t* q, size_t* end) {
    const __m512 vinv = _mm512_set1_ps(inv);
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    __m512i vsum = _mm512_setzero_si512();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), vinv));
      v = _mm512_min_epi32(_mm512_max_epi32(v, lo), hi);
      vsum = _mm512_add_epi32(vsum, v);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtepi32_epi8(v));
    }
    *end = i;
    return _mm512_reduce_add_epi32(vsum);
  }
};

}  // namespace

void quantize_row_absmax_int8__avx512(const float* x, size_t n, int8_t* q, float* scale, int32_t* sum) {
  quantize_row_absmax<Avx512>(x, n, q, scale, sum);
}

}  // namespace tern
