// The ternary linear layer: y = W·x for W in {-1,0,+1}·scale and x quantized per token
// to int8 by absmax. This is the API the runtime calls; behind it the dispatcher picks
// the microkernels for this CPU (scalar reference always available).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/isa.h"
#include "kernels/ternary_layout.h"
#include "platform/error.h"
#include "platform/thread_pool.h"

namespace tern {

// One row (token) quantized: scale = max|x| / 127 (multiply convention, 0 -> all zero),
// q = round-half-even(x / scale) in [-127, 127], sum = Σ q (for kernels that offset-encode).
void quantize_row_absmax_int8(const float* x, size_t n, int8_t* q, float* scale, int32_t* sum);
// The level quantize_row_absmax_int8 runs (kernels/isa.h).
Isa quantize_active_isa();
// The same through the quantizer of a given ISA (bit-identical results; tests, benchmarks).
Error quantize_row_absmax_int8_isa(Isa isa, const float* x, size_t n, int8_t* q, float* scale, int32_t* sum);

// Activations for `tokens` rows of `cols` int8 values, row i at q + i * stride.
struct QuantizedActivations {
  const int8_t* q = nullptr;
  const float* scales = nullptr;  // per token, multiply convention
  const int32_t* sums = nullptr;  // per token Σ q; may be null (then computed where needed)
  size_t tokens = 0;
  size_t cols = 0;
  size_t stride = 0;  // elements between rows (>= cols)
};

struct TernaryMatrix {
  TernaryLayout layout = TernaryLayout::T2RowMajor;
  const uint8_t* data = nullptr;
  size_t size_bytes = 0;
  size_t rows = 0;     // output features
  size_t cols = 0;     // input features
  float scale = 1.0f;  // dequantized weight = code * scale
};

// Checks a matrix once, at load: known layout and enough bytes for its padded tiles. No
// alignment is needed: every kernel loads its tiles unaligned (bundles align segments to
// 64 bytes anyway, so tiles never straddle a cache line there).
Error ternary_matrix_validate(const TernaryMatrix& w);

// y[t * y_stride + r] = w.scale * x.scales[t] * Σ_c code[r][c] * x.q[t][c]
// for t < x.tokens, r < w.rows. One token is the decode GEMV; several are prefill GEMM.
// Preconditions (checked by ternary_matrix_validate at load, not here): x.cols == w.cols.
// T2Interleaved16 and T3Interleaved16 run the SIMD microkernels of
// ternary_active_isa(layout); T2RowMajor (the reference layout) always runs the slow scalar loop.
void ternary_matmul(const TernaryMatrix& w, const QuantizedActivations& x, float* y, size_t y_stride,
                    const ThreadPool* pool);

// Several products of the same activations (q/k/v, gate/up), each exactly as
// ternary_matmul computes it, in one parallel pass: one fork-join instead of one per
// matrix, and the threads share out the row blocks of all of them together (a 640-row k
// projection alone is 40 blocks, too few to keep two threads equally busy).
struct TernaryMatmulOutput {
  const TernaryMatrix* w = nullptr;
  float* y = nullptr;
  size_t y_stride = 0;
};
void ternary_matmul_fused(const TernaryMatmulOutput* outputs, size_t count, const QuantizedActivations& x,
                          const ThreadPool* pool);

// The same product as exact integers (tests and the scalar reference):
// acc[t * rows + r] = Σ_c code[r][c] * x.q[t][c].
// Works for every layout (reads one weight at a time).
void ternary_matmul_int32_reference(const TernaryMatrix& w, const QuantizedActivations& x, int32_t* acc);

// The level whose block kernel ternary_matmul runs: the first of its table within
// active_isa_flags() (TERN_ISA caps them), chosen once.
Isa ternary_active_isa();
// The level of the block kernel ternary_matmul runs for `layout` (each tiled layout has its
// own table; T2RowMajor is always Scalar).
Isa ternary_active_isa(TernaryLayout layout);

// ternary_matmul with the kernels a CPU at level `isa` runs (tests, benchmarks).
// UnsupportedCpu when this build or CPU cannot run that level. T2RowMajor always runs the scalar reference loop.
Error ternary_matmul_isa(Isa isa, const TernaryMatrix& w, const QuantizedActivations& x, float* y, size_t y_stride,
                         const ThreadPool* pool);
// The exact integer product through the kernels of `isa`: acc[t * rows + r] as in
// ternary_matmul_int32_reference.
Error ternary_matmul_int32(Isa isa, const TernaryMatrix& w, const QuantizedActivations& x, int32_t* acc,
                           const ThreadPool* pool);

}  // namespace tern
