// AVX-512 mixed-precision attention loops (built with -mavx512f -mavx512bw -mavx512vl on this file only).
#include "kernels/f32_vec_avx2.h"
#include "kernels/f32_vec_avx512.h"
#include "kernels/kv_attention_impl.h"
#include "kernels/kv_codes_x86.h"

namespace tern {
namespace {

// Codes c..c+15 as one zmm.
template <uint32_t B>
inline __m512 codes16(const uint8_t* row, uint32_t c) {
  const __m512d lo = _mm512_castps_pd(_mm512_castps256_ps512(kv_codes8<B>(row, c)));
  return _mm512_castpd_ps(_mm512_insertf64x4(lo, _mm256_castps_pd(kv_codes8<B>(row, c + 8)), 1));
}

struct Avx512 : F32x16 {
  template <uint32_t B>
  static void codes(const uint8_t* row, uint32_t c, Vec* v) {
    *v = codes16<B>(row, c);
  }

  // Sixteen columns a step in a zmm per query, then eight in a ymm.
  // Sixteen columns a step in a zmm per query, then eight in a ymm.
  template <uint32_t B, uint32_t Q>
  static uint32_t row_dots(const float* qs, const uint8_t* row, uint32_t head_dim, float* sums) {
    const uint32_t body = head_dim & ~7u;
    __m512 acc16[Q];
    __m256 acc8[Q];
    for (uint32_t i = 0; i < Q; ++i) {
      acc16[i] = _mm512_setzero_ps();
      acc8[i] = _mm256_setzero_ps();
    }
    uint32_t c = 0;
    for (; c + 16 <= body; c += 16) {
      const __m512 codes = codes16<B>(row, c);
      for (uint32_t i = 0; i < Q; ++i)
        acc16[i] = _mm512_fmadd_ps(_mm512_loadu_ps(qs + i * head_dim + c), codes, acc16[i]);
    }
    for (; c < body; c += 8) {
      const __m256 codes = kv_codes8<B>(row, c);
      for (uint32_t i = 0; i < Q; ++i)
        acc8[i] = _mm256_fmadd_ps(_mm256_loadu_ps(qs + i * head_dim + c), codes, acc8[i]);
    }
    for (uint32_t i = 0; i < Q; ++i) sums[i] = hsum(acc16[i]) + F32x8::hsum(acc8[i]);
    return c;
  }
};

}  // namespace

const KvAttentionUkernels kv_attention__avx512 = kv_attention_impl::ukernels<Avx512>();

}  // namespace tern
