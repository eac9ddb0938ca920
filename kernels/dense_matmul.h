// Dense (non-ternary) weights: the token embedding and the lm_head, stored as f32, f16,
// or int8/int4 with group scales (the converter's --embed choice).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/half.h"
#include "kernels/isa.h"
#include "platform/error.h"
#include "platform/thread_pool.h"

namespace tern {

// Ids are stored in bundles: append, never renumber.
enum class DenseType : uint32_t {
  F32 = 0,
  F16 = 1,  // IEEE half
  BF16 = 2,
  Q8 = 3,  // int8 symmetric, one f32 scale per group of `group` columns
  Q4 = 4,  // int4 symmetric in [-8, 7] stored +8, two per byte (low nibble = even column), group scales
};
const char* to_string(DenseType type);

struct DenseMatrix {
  DenseType type = DenseType::F32;
  const void* data = nullptr;
  size_t size_bytes = 0;
  const float* scales = nullptr;  // Q8/Q4: rows * ceil(cols / group) scales, row-major
  size_t rows = 0;
  size_t cols = 0;
  size_t group = 0;  // Q8/Q4 group size in columns (Q4: even)
};

// Bytes of `data` for a rows x cols matrix of `type` (scales not included).
size_t dense_data_size(DenseType type, size_t rows, size_t cols);
size_t dense_scale_count(DenseType type, size_t rows, size_t cols, size_t group);
Error dense_matrix_validate(const DenseMatrix& m);

// out[c] = W[row][c] (dequantized): the embedding lookup.
void dense_row_f32(const DenseMatrix& m, size_t row, float* out);
// y[r] = Σ_c W[r][c] * x[c] for every row: the lm_head for one token.
// SIMD for the selected ISA (f32/f16/bf16, and q8 when the group is a multiple of the
// vector width); other cases run the scalar reference.
void dense_gemv_f32(const DenseMatrix& m, const float* x, float* y, const ThreadPool* pool);
// The same with the kernels of a given ISA (tests, benchmarks); UnsupportedCpu if it cannot run.
Error dense_gemv_f32_isa(Isa isa, const DenseMatrix& m, const float* x, float* y, const ThreadPool* pool);
// The levels dense_gemv_f32 and dense_gemv_i8 run (kernels/isa.h).
Isa dense_gemv_active_isa();
Isa dense_gemv_i8_active_isa();

// The lm_head for one token with int8 activations, for Q8/Q4 matrices: x is quantized per
// weight group (absmax to +-127, round half to even) and every group's dot product is exact
// in int32 before the weight and activation scales apply — what llama.cpp's q8_0/q4_0 dot
// products do. Widening int8 weights to f32 costs three vector instructions per 8 weights
// where an integer dot product costs about one per 32, and this GEMV reads the largest
// matrix of a decode step. The error per output is at most Σ_c |W[r][c]| * xscale(c) / 2
// beyond f32 rounding. Other types, groups that are not whole vectors (q8: 32 columns, q4:
// 64), cols % group != 0 and cols > kDenseI8MaxCols run dense_gemv_f32.
constexpr size_t kDenseI8MaxCols = 16384;  // activations are quantized into a stack buffer
bool dense_gemv_i8_applies(const DenseMatrix& m);
void dense_gemv_i8(const DenseMatrix& m, const float* x, float* y, const ThreadPool* pool);
Error dense_gemv_i8_isa(Isa isa, const DenseMatrix& m, const float* x, float* y, const ThreadPool* pool);

// The lm_head for n tokens at once: y[t] (vocab floats) gets exactly what dense_gemv_i8(m,
// x + t * x_stride, y[t]) gives, bit for bit, but the matrix streams from memory once: each
// tile of rows runs for every token while it is in cache (sessions decoded together,
// speculative verification). `work` holds the tokens' quantized activations,
// dense_gemv_tokens_work_bytes(m.cols, n) bytes aligned to 8 (unused for f32/f16/bf16).
size_t dense_gemv_tokens_work_bytes(size_t cols, size_t n);
void dense_gemv_i8_tokens(const DenseMatrix& m, const float* x, size_t x_stride, size_t n, float* const* y, void* work,
                          const ThreadPool* pool);
Error dense_gemv_i8_tokens_isa(Isa isa, const DenseMatrix& m, const float* x, size_t x_stride, size_t n,
                               float* const* y, void* work, const ThreadPool* pool);

}  // namespace tern
