// Dense GEMV, AVX2 + FMA (+ F16C for f16, checked by the caller).
#include "kernels/dense_gemv_impl.h"
#include "kernels/dense_ukernels.h"
#include "kernels/f32_vec_avx2.h"
#include "platform/cpu_features.h"

namespace tern {
namespace {

struct Avx2 : F32x8 {
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
