// AVX2 KV quantization loops (built with -mavx2 -mfma -mf16c on this file only).
#include <immintrin.h>

#include <cmath>

#include "kernels/kv_ukernels.h"

namespace tern {
namespace {

void key_block_minmax(const float* keys, uint32_t tokens, uint32_t head_dim, float* lo, float* hi) {
  uint32_t c = 0;
  for (; c + 8 <= head_dim; c += 8) {
    __m256 l = _mm256_loadu_ps(keys + c), h = l;
    for (uint32_t t = 1; t < tokens; ++t) {
      const __m256 x = _mm256_loadu_ps(keys + static_cast<size_t>(t) * head_dim + c);
      l = _mm256_min_ps(x, l);
      h = _mm256_max_ps(x, h);
    }
    _mm256_storeu_ps(lo + c, l);
    _mm256_storeu_ps(hi + c, h);
  }
  for (; c < head_dim; ++c) {
    float l = keys[c], h = keys[c];
    for (uint32_t t = 1; t < tokens; ++t) {
      const float x = keys[static_cast<size_t>(t) * head_dim + c];
      l = x < l ? x : l;
      h = x > h ? x : h;
    }
    lo[c] = l;
    hi[c] = h;
  }
}

void range(const float* x, uint32_t n, float* lo, float* hi) {
  float l = x[0], h = x[0];
  uint32_t i = 0;
  if (n >= 8) {
    __m256 vl = _mm256_loadu_ps(x), vh = vl;
    for (i = 8; i + 8 <= n; i += 8) {
      const __m256 v = _mm256_loadu_ps(x + i);
      vl = _mm256_min_ps(v, vl);
      vh = _mm256_max_ps(v, vh);
    }
    alignas(32) float a[8], b[8];
    _mm256_store_ps(a, vl);
    _mm256_store_ps(b, vh);
    l = a[0];
    h = b[0];
    for (int k = 1; k < 8; ++k) {
      l = a[k] < l ? a[k] : l;
      h = b[k] > h ? b[k] : h;
    }
  }
  for (; i < n; ++i) {
    l = x[i] < l ? x[i] : l;
    h = x[i] > h ? x[i] : h;
  }
  *lo = l;
  *hi = h;
}

void codes(const float* x, const float* min, const float* inv, uint32_t n, uint32_t levels, uint8_t* out) {
  const float top = static_cast<float>(levels);
  const __m256 zero = _mm256_setzero_ps(), vtop = _mm256_set1_ps(top);
  uint32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 r = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(min + i)), _mm256_loadu_ps(inv + i));
    r = _mm256_round_ps(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm256_min_ps(_mm256_max_ps(r, zero), vtop);
    alignas(32) int32_t q[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(q), _mm256_cvttps_epi32(r));
    for (int k = 0; k < 8; ++k) out[i + k] = static_cast<uint8_t>(q[k]);
  }
  for (; i < n; ++i) {
    float r = std::nearbyint((x[i] - min[i]) * inv[i]);
    r = r < 0.0f ? 0.0f : (r > top ? top : r);
    out[i] = static_cast<uint8_t>(r);
  }
}

}  // namespace

const KvQuantUkernels kv_quant__avx2 = {key_block_minmax, range, codes};

}  // namespace tern
