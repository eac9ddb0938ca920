// Microkernels for T2Interleaved16 and T3Interleaved16 (see ternary_layout.h), one
// translation unit per ISA.
// Internal to kernels/: the public entry points are in ternary_matmul.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/ternary_base3.h"
#include "kernels/ternary_layout.h"

namespace tern {

// Raw dot products of one 16-row block against `tokens` activation rows:
//   out[t * 16 + i] = Σ_c (code(row i, c) + 1) * q[t * q_stride + c]
// over all `cols` columns (the +1 offset is what the unsigned-by-signed dot products
// need; the caller subtracts Σ_c q). `block` points at the block's first tile;
// 1 <= tokens <= the kernel's max_tokens. Reads no activation byte at or past `cols`.
using TernaryBlockKernel = void (*)(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride,
                                    size_t tokens, int32_t* out);

struct TernaryBlockKernelInfo {
  TernaryBlockKernel fn;
  size_t max_tokens;  // token tile: weights are unpacked once per tile, reused per token
};

// Copies the last cols % 16 activations of each token into 16-byte zero-padded rows so
// the kernels can run the last, partial tile with whole-vector loads.
inline size_t t2i_copy_tail(const int8_t* q, size_t q_stride, size_t tokens, size_t cols, int8_t* tail) {
  const size_t full = cols / kT2iBlockCols * kT2iBlockCols;
  for (size_t t = 0; t < tokens; ++t) {
    std::memset(tail + t * kT2iBlockCols, 0, kT2iBlockCols);
    std::memcpy(tail + t * kT2iBlockCols, q + t * q_stride + full, cols - full);
  }
  return full / kT2iBlockCols;
}

// t2i_copy_tail for base-3 tiles: the last cols % 20 activations into 20-byte rows.
inline size_t t3i_copy_tail(const int8_t* q, size_t q_stride, size_t tokens, size_t cols, int8_t* tail) {
  const size_t full = cols / kT3iBlockCols * kT3iBlockCols;
  for (size_t t = 0; t < tokens; ++t) {
    std::memset(tail + t * kT3iBlockCols, 0, kT3iBlockCols);
    std::memcpy(tail + t * kT3iBlockCols, q + t * q_stride + full, cols - full);
  }
  return full / kT3iBlockCols;
}

extern const TernaryBlockKernelInfo ternary_block_t2i16__scalar;
// The same contract over base-3 tiles (ternary_base3.h): 20-column tiles, same output.
extern const TernaryBlockKernelInfo ternary_block_t3i16__scalar;
#if defined(__x86_64__)
extern const TernaryBlockKernelInfo ternary_block_t2i16__avx2;
extern const TernaryBlockKernelInfo ternary_block_t2i16__avx512vnni;
extern const TernaryBlockKernelInfo ternary_block_t3i16__avx2;
#endif
#if defined(__aarch64__)
extern const TernaryBlockKernelInfo ternary_block_t2i16__neon;
extern const TernaryBlockKernelInfo ternary_block_t2i16__neondot;
extern const TernaryBlockKernelInfo ternary_block_t2i16__neoni8mm;
extern const TernaryBlockKernelInfo ternary_block_t3i16__neon;
extern const TernaryBlockKernelInfo ternary_block_t3i16__neondot;
#endif

}  // namespace tern
