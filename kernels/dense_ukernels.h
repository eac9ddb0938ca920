// SIMD dense GEMV microkernels (internal): y[r] = Σ_c W[r][c] * x[c] for rows
// [row_begin, row_end), one translation unit per ISA. Each returns false when it has no
// fast path for the matrix (type, or Q8 groups that are not whole vectors), and the
// caller falls back to the scalar reference.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dense_matmul.h"

namespace tern {

using DenseGemvKernel = bool (*)(const DenseMatrix& m, const float* x, float* y, size_t row_begin, size_t row_end);

#if defined(__x86_64__)
bool dense_gemv__avx2(const DenseMatrix& m, const float* x, float* y, size_t row_begin, size_t row_end);
bool dense_gemv__avx512(const DenseMatrix& m, const float* x, float* y, size_t row_begin, size_t row_end);
#endif
#if defined(__aarch64__)
bool dense_gemv__neon(const DenseMatrix& m, const float* x, float* y, size_t row_begin, size_t row_end);
#endif

// Integer q8/q4 GEMV (dense_gemv_i8): one token's activations quantized per weight group.
// For Q4 each 64-column chunk holds its even columns first, then its odd columns, so the
// low and high nibbles of 32 weight bytes meet 32 consecutive activation bytes each.
struct DenseActivationsI8 {
  const int8_t* q;      // cols values
  const float* scales;  // one per group
  const int32_t* sums;  // one per group: Σ q, which undoes the +8 of Q4's stored nibbles
};
using DenseGemvI8Fn = void(const DenseMatrix& m, const DenseActivationsI8& x, float* y, size_t row_begin,
                           size_t row_end);
using DenseGemvI8Kernel = DenseGemvI8Fn*;

// Position of column c in DenseActivationsI8::q.
inline size_t dense_i8_position(DenseType type, size_t c) {
  if (type != DenseType::Q4) return c;
  const size_t j = c % 64;
  return c - j + (j % 2) * 32 + j / 2;
}

// n tokens' activations over the same rows: y[t][r] for t < n, each equal to what the one-token
// kernel of the same ISA gives bit for bit. The x86 ones load and unpack each q4 weight group
// once for up to four tokens; elsewhere the one-token kernel runs per token.
using DenseGemvI8TokensFn = void(const DenseMatrix& m, const DenseActivationsI8* x, size_t n, float* const* y,
                                 size_t row_begin, size_t row_end);
using DenseGemvI8TokensKernel = DenseGemvI8TokensFn*;

// One ISA's pair, a row of the dispatch table.
struct DenseGemvI8Kernels {
  DenseGemvI8Kernel row;
  DenseGemvI8TokensKernel tokens;
};

// The kernels, declared by their type (each file defines one with the DenseGemvI8Fn signature).
DenseGemvI8Fn dense_gemv_i8__scalar;
#if defined(__x86_64__)
DenseGemvI8Fn dense_gemv_i8__avx2, dense_gemv_i8__avx512vnni;
DenseGemvI8TokensFn dense_gemv_i8_tokens__avx2, dense_gemv_i8_tokens__avx512vnni;
#endif
#if defined(__aarch64__)
DenseGemvI8Fn dense_gemv_i8__neon, dense_gemv_i8__neondot;
#endif

}  // namespace tern
