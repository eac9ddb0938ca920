// SIMD dense GEMV microkernels (internal): y[r] = Σ_c W[r][c] * x[c] for rows
// [row_begin, row_end), one translation unit per ISA. Each returns false when it has no
// fast path for the matrix (type, or Q8 groups that are not whole vectors), and the
// caller falls back to the scalar reference.
#pragma once

#include <cstddef>

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

}  // namespace tern
