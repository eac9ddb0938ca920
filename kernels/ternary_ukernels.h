// Microkernels for T2Interleaved16 and T3Interleaved16 (see ternary_layout.h), one
// translation unit per ISA.
// Internal to kernels/: the public entry points are in ternary_matmul.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/ternary_base3.h"
#include "kernels/ternary_layout.h"
#include "kernels/with_constant.h"

namespace tern {

// Raw dot products of one 16-row block against `tokens` activation rows:
//   out[t * 16 + i] = Σ_c (code(row i, c) + 1) * q[t * q_stride + c]
// over all `cols` columns (the +1 offset is what the unsigned-by-signed dot products
// need; the caller subtracts Σ_c q). `block` points at the block's first tile;
// 1 <= tokens <= the kernel's max_tokens. Reads no activation byte at or past `cols`.
using TernaryBlockKernel = void (*)(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, size_t tokens,
                                    int32_t* out);

// The same for two consecutive blocks (the second's tiles start where the first's end):
//   out[(b * tokens + t) * 16 + i] for block b = 0, 1.
// Each activation load then serves both blocks' weights, which is what keeps a core whose
// multiplies are the limit (AVX-512 VNNI) at its multiply rate.
struct TernaryBlockKernelInfo {
  TernaryBlockKernel fn;
  size_t max_tokens;                        // token tile: weights are unpacked once per tile, reused per token
  TernaryBlockKernel two_blocks = nullptr;  // optional; the driver pairs row blocks when set
  size_t two_blocks_max_tokens = 0;
};

// The two tile layouts as the kernels see them: 16 rows x kCols columns in kBytes bytes,
// byte 4 * r + m holding plane j (columns 4j + m) as digit(byte, j) = code + 1.
struct T2iTiles {
  static constexpr size_t kRows = kT2iBlockRows, kCols = kT2iBlockCols, kBytes = kT2iTileBytes;
  static unsigned digit(uint8_t byte, unsigned j) { return (byte >> (2 * j)) & 3u; }
};
struct T3iTiles {
  static constexpr size_t kRows = kT3iBlockRows, kCols = kT3iBlockCols, kBytes = kT3iTileBytes;
  static unsigned digit(uint8_t byte, unsigned j) { return t3i_digit(byte, j); }
};

// Copies the last cols % kCols activations of each token into kCols-byte zero-padded rows
// so the kernels can run the last, partial tile with whole-vector loads.
template <typename Tiles>
inline void copy_tail(const int8_t* q, size_t q_stride, size_t tokens, size_t cols, int8_t* tail) {
  const size_t full = cols / Tiles::kCols * Tiles::kCols;
  for (size_t t = 0; t < tokens; ++t) {
    std::memset(tail + t * Tiles::kCols, 0, Tiles::kCols);
    std::memcpy(tail + t * Tiles::kCols, q + t * q_stride + full, cols - full);
  }
}

// tile(weights, activations, stride) for every tile of a block of NT tokens, the last one
// reading zero-padded activations when K is not a multiple of kCols: a single copy of the
// body keeps the accumulators in registers.
template <typename Tiles, size_t NT, typename Tile>
inline void for_each_tile(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, Tile&& tile) {
  const size_t full = cols / Tiles::kCols;
  const size_t k_tiles = (cols + Tiles::kCols - 1) / Tiles::kCols;
  int8_t tail[NT * Tiles::kCols];
  if (k_tiles != full) copy_tail<Tiles>(q, q_stride, NT, cols, tail);
  for (size_t kt = 0; kt < k_tiles; ++kt) {
    const bool padded = kt == full;
    tile(block + kt * Tiles::kBytes, padded ? tail : q + kt * Tiles::kCols, padded ? Tiles::kCols : q_stride);
  }
}

// The portable reference microkernel (ternary_block_<layout>__scalar.cpp): reads the tile
// bytes exactly as the layout describes, one weight at a time.
constexpr size_t kTernaryReferenceMaxTokens = 8;
template <typename Tiles>
void ternary_block_reference(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, size_t tokens,
                             int32_t* out) {
  const size_t k_tiles = (cols + Tiles::kCols - 1) / Tiles::kCols;
  for (size_t t = 0; t < tokens; ++t) {
    const int8_t* qt = q + t * q_stride;
    for (size_t r = 0; r < Tiles::kRows; ++r) {
      int32_t acc = 0;
      for (size_t kt = 0; kt < k_tiles; ++kt) {
        const uint8_t* tile = block + kt * Tiles::kBytes;
        for (size_t c = 0; c < Tiles::kCols; ++c) {
          const size_t col = kt * Tiles::kCols + c;
          if (col >= cols) break;
          acc += static_cast<int>(Tiles::digit(tile[4 * r + c % 4], static_cast<unsigned>(c / 4))) * qt[col];
        }
      }
      out[t * Tiles::kRows + r] = acc;
    }
  }
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
