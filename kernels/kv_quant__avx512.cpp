// AVX-512 KV quantization loops (built with -mavx512f -mavx512bw -mavx512vl on this file only).
// GCC 12 reports its own _mm512_undefined_* helpers as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cmath>

#include "kernels/kv_ukernels.h"

namespace tern {
namespace {

void key_block_minmax(const float* keys, uint32_t tokens, uint32_t head_dim, float* lo, float* hi) {
  uint32_t c = 0;
  for (; c + 16 <= head_dim; c += 16) {
    __m512 l = _mm512_loadu_ps(keys + c), h = l;
    for (uint32_t t = 1; t < tokens; ++t) {
      const __m512 x = _mm512_loadu_ps(keys + static_cast<size_t>(t) * head_dim + c);
      l = _mm512_min_ps(x, l);
      h = _mm512_max_ps(x, h);
    }
    _mm512_storeu_ps(lo + c, l);
    _mm512_storeu_ps(hi + c, h);
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
  if (n >= 16) {
    __m512 vl = _mm512_loadu_ps(x), vh = vl;
    for (i = 16; i + 16 <= n; i += 16) {
      const __m512 v = _mm512_loadu_ps(x + i);
      vl = _mm512_min_ps(v, vl);
      vh = _mm512_max_ps(v, vh);
    }
    l = _mm512_reduce_min_ps(vl);
    h = _mm512_reduce_max_ps(vh);
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
  const __m512 zero = _mm512_setzero_ps(), vtop = _mm512_set1_ps(top);
  uint32_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 r = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(min + i)), _mm512_loadu_ps(inv + i));
    r = _mm512_roundscale_ps(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm512_min_ps(_mm512_max_ps(r, zero), vtop);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(r)));
  }
  for (; i < n; ++i) {
    float r = std::nearbyint((x[i] - min[i]) * inv[i]);
    r = r < 0.0f ? 0.0f : (r > top ? top : r);
    out[i] = static_cast<uint8_t>(r);
  }
}

}  // namespace

const KvQuantUkernels kv_quant__avx512 = {key_block_minmax, range, codes};

}  // namespace tern
