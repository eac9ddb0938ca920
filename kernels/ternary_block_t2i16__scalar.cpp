// Portable reference microkernel for T2Interleaved16: reads the tile bytes exactly as
// the layout comment describes, one weight at a time.
#include "kernels/ternary_ukernels.h"

namespace tern {
namespace {

constexpr size_t kMaxTokens = 8;

void block_t2i16_scalar(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, size_t tokens,
                        int32_t* out) {
  const size_t k_tiles = (cols + kT2iBlockCols - 1) / kT2iBlockCols;
  for (size_t t = 0; t < tokens; ++t) {
    const int8_t* qt = q + t * q_stride;
    for (size_t r = 0; r < kT2iBlockRows; ++r) {
      int32_t acc = 0;
      for (size_t kt = 0; kt < k_tiles; ++kt) {
        const uint8_t* tile = block + kt * kT2iTileBytes;
        for (size_t c = 0; c < kT2iBlockCols; ++c) {
          const size_t col = kt * kT2iBlockCols + c;
          if (col >= cols) break;
          const int w = (tile[4 * r + c % 4] >> (2 * (c / 4))) & 3;
          acc += w * qt[col];
        }
      }
      out[t * kT2iBlockRows + r] = acc;
    }
  }
}

}  // namespace

const TernaryBlockKernelInfo ternary_block_t2i16__scalar = {block_t2i16_scalar, kMaxTokens};

}  // namespace tern
