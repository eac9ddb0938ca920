// Per-ISA activation quantizers (internal): the same result as the scalar
// quantize_row_absmax_int8, bit for bit (the product x * (127 / amax) is one IEEE
// multiply per element in every version, rounded half to even by the vector convert).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tern {

using QuantizeRowFn = void (*)(const float* x, size_t n, int8_t* q, float* scale, int32_t* sum);

// The scalar version, also used for tails.
void quantize_row_absmax_int8__scalar(const float* x, size_t n, int8_t* q, float* scale, int32_t* sum);
// Quantizes x[i0..n) with a known 127 / amax into q; returns Σ q over that range.
int32_t quantize_tail__scalar(const float* x, size_t i0, size_t n, float inv, int8_t* q);

// The steps every version shares, around the including file's vector loops `V` (defined in
// its anonymous namespace, so the instantiation carries only that file's ISA flags):
//   V::abs_max(x, n, &i): max |x| over x[0..i) for the i it reached (the rest is done here);
//   V::convert(x, n, inv, q, &i): quantizes x[0..i), returns Σ q over it (the rest: scalar).
// All zeros (scale 0, sum 0) when every x is 0.
template <typename V>
inline void quantize_row_absmax(const float* x, size_t n, int8_t* q, float* scale, int32_t* sum) {
  size_t i = 0;
  float amax = V::abs_max(x, n, &i);
  for (; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  if (amax == 0.0f) {
    std::memset(q, 0, n);
    *scale = 0.0f;
    *sum = 0;
    return;
  }
  const float inv = 127.0f / amax;
  i = 0;
  const int32_t body = V::convert(x, n, inv, q, &i);
  *sum = body + quantize_tail__scalar(x, i, n, inv, q);
  *scale = amax / 127.0f;
}

#if defined(__x86_64__)
void quantize_row_absmax_int8__avx2(const float* x, size_t n, int8_t* q, float* scale, int32_t* sum);
void quantize_row_absmax_int8__avx512(const float* x, size_t n, int8_t* q, float* scale, int32_t* sum);
#endif
#if defined(__aarch64__)
void quantize_row_absmax_int8__neon(const float* x, size_t n, int8_t* q, float* scale, int32_t* sum);
#endif

}  // namespace tern
