// AVX2 mixed-precision attention loops (built with -mavx2 -mfma -mf16c on this file only).
#include "kernels/f32_vec_avx2.h"
#include "kernels/kv_attention_impl.h"
#include "kernels/kv_codes_x86.h"

namespace tern {
namespace {

struct Avx2 : F32x8 {
  template <uint32_t B>
  static void codes(const uint8_t* row, uint32_t c, Vec* v) {
    *v = kv_codes8<B>(row, c);
  }

  template <uint32_t B, uint32_t Q>
  static uint32_t row_dots(const float* qs, const uint8_t* row, uint32_t head_dim, float* sums) {
    const uint32_t body = head_dim & ~7u;
    __m256 acc[Q];
    for (uint32_t i = 0; i < Q; ++i) acc[i] = _mm256_setzero_ps();
    uint32_t c = 0;
    __m256 extra = _mm256_setzero_ps();  // one query alone: a second chain hides the FMA latency
    if (Q == 1) {
      for (; c + 16 <= body; c += 16) {
        acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(qs + c), kv_codes8<B>(row, c), acc[0]);
        extra = _mm256_fmadd_ps(_mm256_loadu_ps(qs + c + 8), kv_codes8<B>(row, c + 8), extra);
      }
    }
    for (; c < body; c += 8) {
      const __m256 codes = kv_codes8<B>(row, c);
      for (uint32_t i = 0; i < Q; ++i) acc[i] = _mm256_fmadd_ps(_mm256_loadu_ps(qs + i * head_dim + c), codes, acc[i]);
    }
    if (Q == 1) acc[0] = _mm256_add_ps(acc[0], extra);
    for (uint32_t i = 0; i < Q; ++i) sums[i] = hsum(acc[i]);
    return c;
  }
};

}  // namespace

const KvAttentionUkernels kv_attention__avx2 = kv_attention_impl::ukernels<Avx2>();

}  // namespace tern
