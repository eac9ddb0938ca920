// Per-token absmax int8 quantization, AVX-512F: VCVTPS2DQ rounds half to even (the
// default MXCSR mode), VPMOVDB narrows the clamped values.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/quantize_ukernels.h"

namespace tern {

void quantize_row_absmax_int8__avx512(const float* x, size_t n, int8_t* q, float* scale, int32_t* sum) {
  __m512 vmax = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
  float amax = _mm512_reduce_max_ps(vmax);
  for (; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  if (amax == 0.0f) {
    std::memset(q, 0, n);
    *scale = 0.0f;
    *sum = 0;
    return;
  }
  const float inv = 127.0f / amax;
  const __m512 vinv = _mm512_set1_ps(inv);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  __m512i vsum = _mm512_setzero_si512();
  for (i = 0; i + 16 <= n; i += 16) {
    __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), vinv));
    v = _mm512_min_epi32(_mm512_max_epi32(v, lo), hi);
    vsum = _mm512_add_epi32(vsum, v);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtepi32_epi8(v));
  }
  *sum = _mm512_reduce_add_epi32(vsum) + quantize_tail__scalar(x, i, n, inv, q);
  *scale = amax / 127.0f;
}

}  // namespace tern
