// The KV quantization loops shared by kv_quant__{avx2,avx512,neon}.cpp. Every function is a
// template on the including file's vector traits `V` (defined in that file's anonymous
// namespace, so each instantiation carries only that file's ISA flags):
//   using Vec; kWidth; load(const float*), store(float*, Vec), min(a, b), max(a, b),
//   reduce_min(Vec), reduce_max(Vec);
//   kCodeStep and codes(x, min, inv, top, out): kCodeStep codes, round half to even, clamped;
//   kHalfStep and halves(x, out): kHalfStep IEEE halves, as half.h's f32_to_f16.
// The columns past the last vector go through the scalar steps of kv_ukernels.h.
#pragma once

#include "kernels/kv_ukernels.h"

namespace tern {
namespace kv_quant_impl {

template <typename V>
void key_block_minmax(const float* keys, uint32_t tokens, uint32_t head_dim, float* lo, float* hi) {
  uint32_t c = 0;
  for (; c + V::kWidth <= head_dim; c += V::kWidth) {
    typename V::Vec l = V::load(keys + c), h = l;
    for (uint32_t t = 1; t < tokens; ++t) {
      const typename V::Vec x = V::load(keys + static_cast<size_t>(t) * head_dim + c);
      l = V::min(x, l);
      h = V::max(x, h);
    }
    V::store(lo + c, l);
    V::store(hi + c, h);
  }
  for (; c < head_dim; ++c) kv_column_range(keys, tokens, head_dim, c, lo + c, hi + c);
}

template <typename V>
void range(const float* x, uint32_t n, float* lo, float* hi) {
  float l = x[0], h = x[0];
  uint32_t i = 0;
  if (n >= V::kWidth) {
    typename V::Vec vl = V::load(x), vh = vl;
    for (i = V::kWidth; i + V::kWidth <= n; i += V::kWidth) {
      const typename V::Vec v = V::load(x + i);
      vl = V::min(v, vl);
      vh = V::max(v, vh);
    }
    l = V::reduce_min(vl);
    h = V::reduce_max(vh);
  }
  for (; i < n; ++i) kv_widen_range(x[i], &l, &h);
  *lo = l;
  *hi = h;
}

template <typename V>
void codes(const float* x, const float* min, const float* inv, uint32_t n, uint32_t levels, uint8_t* out) {
  const float top = static_cast<float>(levels);
  uint32_t i = 0;
  for (; i + V::kCodeStep <= n; i += V::kCodeStep) V::codes(x + i, min + i, inv + i, top, out + i);
  for (; i < n; ++i) out[i] = kv_code(x[i], min[i], inv[i], top);
}

template <typename V>
void float_halves(const float* x, uint32_t n, uint16_t* out) {
  uint32_t i = 0;
  for (; i + V::kHalfStep <= n; i += V::kHalfStep) V::halves(x + i, out + i);
  for (; i < n; ++i) out[i] = f32_to_f16(x[i]);
}

template <typename V>
constexpr KvQuantUkernels ukernels() {
  return {key_block_minmax<V>, range<V>, codes<V>, float_halves<V>};
}

}  // namespace kv_quant_impl
}  // namespace tern
