// AVX-512 KV quantization loops (built with -mavx512f -mavx512bw -mavx512vl on this file only).
#include "kernels/f32_vec_avx512.h"
#include "kernels/kv_quant_impl.h"

namespace tern {
namespace {

struct Avx512 : F32x16 {
  static constexpr uint32_t kCodeStep = 16;
  static void codes(const float* x, const float* min, const float* inv, float top, uint8_t* out) {
    __m512 r = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x), _mm512_loadu_ps(min)), _mm512_loadu_ps(inv));
    r = _mm512_roundscale_ps(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm512_min_ps(_mm512_max_ps(r, _mm512_setzero_ps()), _mm512_set1_ps(top));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(r)));
  }
  static constexpr uint32_t kHalfStep = 16;
  static void halves(const float* x, uint16_t* out) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x), _MM_FROUND_TO_NEAREST_INT));
  }
};

}  // namespace

const KvQuantUkernels kv_quant__avx512 = kv_quant_impl::ukernels<Avx512>();

}  // namespace tern
