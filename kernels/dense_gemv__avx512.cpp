// Dense GEMV, AVX-512F: f16 via VCVTPH2PS, bf16 by a 16-bit shift, int8 via VPMOVSXBD.
#include "kernels/dense_gemv_impl.h"
#include "kernels/dense_ukernels.h"
#include "kernels/f32_vec_avx512.h"

namespace tern {
namespace {

struct Avx512 : F32x16 {
  static Vec bf16(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static Vec q8(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
};

}  // namespace

bool dense_gemv__avx512(const DenseMatrix& m, const float* x, float* y, size_t row_begin, size_t row_end) {
  return dense_impl::gemv<Avx512>(m, x, y, row_begin, row_end, true);
}

}  // namespace tern
