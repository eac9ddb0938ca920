// AVX2 KV quantization loops (built with -mavx2 -mfma -mf16c on this file only).
#include "kernels/f32_vec_avx2.h"
#include "kernels/kv_quant_impl.h"

namespace tern {
namespace {

struct Avx2 : F32x8 {
  static constexpr uint32_t kCodeStep = 8;
  static void codes(const float* x, const float* min, const float* inv, float top, uint8_t* out) {
    __m256 r = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(min)), _mm256_loadu_ps(inv));
    r = _mm256_round_ps(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm256_min_ps(_mm256_max_ps(r, _mm256_setzero_ps()), _mm256_set1_ps(top));
    alignas(32) int32_t q[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(q), _mm256_cvttps_epi32(r));
    for (int k = 0; k < 8; ++k) out[k] = static_cast<uint8_t>(q[k]);
  }
  static constexpr uint32_t kHalfStep = 8;
  static void halves(const float* x, uint16_t* out) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_cvtps_ph(_mm256_loadu_ps(x), _MM_FROUND_TO_NEAREST_INT));
  }
};

}  // namespace

const KvQuantUkernels kv_quant__avx2 = kv_quant_impl::ukernels<Avx2>();

}  // namespace tern
