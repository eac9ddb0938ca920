// Dense GEMV, AVX2 + FMA (+ F16C for f16, checked by the caller).
#include <immintrin.h>

#include "kernels/dense_gemv_impl.h"
#include "kernels/dense_ukernels.h"
#include "platform/cpu_features.h"

namespace tern {
namespace {

struct Avx2 {
  using Vec = __m256;
  static constexpr size_t kWidth = 8;
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec load_x(const float* p) { return _mm256_loadu_ps(p); }
  static Vec fma(Vec a, Vec b, Vec acc) { return _mm256_fmadd_ps(a, b, acc); }
  static Vec set1(float v) { return _mm256_set1_ps(v); }
  static float hsum(Vec v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static Vec f32(const float* p) { return _mm256_loadu_ps(p); }
  static Vec f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static Vec bf16(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static Vec q8(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
};

}  // namespace

bool dense_gemv__avx2(const DenseMatrix& m, const float* x, float* y, size_t row_begin, size_t row_end) {
  return dense_impl::gemv<Avx2>(m, x, y, row_begin, row_end, cpu_features().f16c);
}

}  // namespace tern
