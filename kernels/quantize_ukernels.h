// Per-ISA activation quantizers (internal): the same result as the scalar
// quantize_row_absmax_int8, bit for bit (the product x * (127 / amax) is one IEEE
// multiply per element in every version, rounded half to even by the vector convert).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern {

using QuantizeRowFn = void (*)(const float* x, size_t n, int8_t* q, float* scale, int32_t* sum);

// The scalar version, also used for tails.
void quantize_row_absmax_int8__scalar(const float* x, size_t n, int8_t* q, float* scale, int32_t* sum);
// Quantizes x[i0..n) with a known 127 / amax into q; returns Σ q over that range.
int32_t quantize_tail__scalar(const float* x, size_t i0, size_t n, float inv, int8_t* q);
#if defined(__x86_64__)
void quantize_row_absmax_int8__avx2(const float* x, size_t n, int8_t* q, float* scale, int32_t* sum);
void quantize_row_absmax_int8__avx512(const float* x, size_t n, int8_t* q, float* scale, int32_t* sum);
#endif
#if defined(__aarch64__)
void quantize_row_absmax_int8__neon(const float* x, size_t n, int8_t* q, float* scale, int32_t* sum);
#endif

}  // namespace tern
