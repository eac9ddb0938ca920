// Dense attention with AVX-512 (f16 caches widened on load): one zmm holds element i of two
// key blocks (sixteen keys), key steps of four blocks, an odd last block in a ymm; values in
// chunks of 64 columns. Multiply and add stay separate (-ffp-contract=off here).
#include "kernels/dense_attention_impl.h"
#include "kernels/f32_vec_avx2.h"
#include "kernels/f32_vec_avx512.h"

namespace tern {
namespace {

struct Avx512 : F32x16 {
  using Half = F32x8;
  static Vec load_blocks(const float* lo, const float* hi) {
    const __m512d l = _mm512_castpd256_pd512(_mm256_castps_pd(_mm256_loadu_ps(lo)));
    return _mm512_castpd_ps(_mm512_insertf64x4(l, _mm256_castps_pd(_mm256_loadu_ps(hi)), 1));
  }
  static Vec load_blocks(const uint16_t* lo, const uint16_t* hi) {
    const __m128i l = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo));
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi));
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(l), h, 1));
  }
};

}  // namespace

const DenseAttentionUkernels dense_attention__avx512 = dense_attention_impl::ukernels<Avx512, 4, 4, 1>();

}  // namespace tern
