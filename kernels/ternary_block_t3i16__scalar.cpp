// Portable reference microkernel for the base-3 tiles (ternary_base3.h): one weight at a
// time, each digit read with the multiply-shift a vector kernel would use.
#include "kernels/ternary_base3.h"
#include "kernels/ternary_ukernels.h"

namespace tern {
namespace {

constexpr size_t kMaxTokens = 8;

void block_t3i16_scalar(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, size_t tokens,
                        int32_t* out) {
  const size_t k_tiles = (cols + kT3iBlockCols - 1) / kT3iBlockCols;
  for (size_t t = 0; t < tokens; ++t) {
    const int8_t* qt = q + t * q_stride;
    for (size_t r = 0; r < kT3iBlockRows; ++r) {
      int32_t acc = 0;
      for (size_t kt = 0; kt < k_tiles; ++kt) {
        const uint8_t* tile = block + kt * kT3iTileBytes;
        for (size_t c = 0; c < kT3iBlockCols; ++c) {
          const size_t col = kt * kT3iBlockCols + c;
          if (col >= cols) break;
          const int w = static_cast<int>(t3i_digit(tile[4 * r + c % 4], static_cast<unsigned>(c / 4)));
          acc += w * qt[col];
        }
      }
      out[t * kT3iBlockRows + r] = acc;
    }
  }
}

}  // namespace

const TernaryBlockKernelInfo ternary_block_t3i16__scalar = {block_t3i16_scalar, kMaxTokens};

}  // namespace tern
