// Per-token absmax int8 quantization, AVX2: VCVTPS2DQ rounds half to even (the default
// MXCSR mode); PACKSSDW / PACKSSWB narrow 32 values, VPERMD restores their order.
#include <immintrin.h>

#include "kernels/quantize_ukernels.h"

namespace tern {
namespace {

struct Avx2 {
  static float abs_max(const float* x, size_t n, size_t* end) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 vmax = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask));
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    *end = i;
    return _mm_cvtss_f32(m);
  }
  static int32_t convert(const float* x, size_t n, float inv, int8_t* q, size_t* end) {
    const __m256 vinv = _mm256_set1_ps(inv);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256i vsum = _mm256_setzero_si256();
    auto convert8 = [&](const float* p) {
      __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(p), vinv));
      v = _mm256_min_epi32(_mm256_max_epi32(v, lo), hi);
      vsum = _mm256_add_epi32(vsum, v);
      return v;
    };
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
      const __m256i v0 = convert8(x + i), v1 = convert8(x + i + 8), v2 = convert8(x + i + 16),
                    v3 = convert8(x + i + 24);
      const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(v0, v1), _mm256_packs_epi32(v2, v3));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), _mm256_permutevar8x32_epi32(bytes, order));
    }
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(vsum), _mm256_extracti128_si256(vsum, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    *end = i;
    return _mm_cvtsi128_si32(s);
  }
};

}  // namespace

void quantize_row_absmax_int8__avx2(const float* x, size_t n, int8_t* q, float* scale, int32_t* sum) {
  quantize_row_absmax<Avx2>(x, n, q, scale, sum);
}

}  // namespace tern
