// T2Interleaved16 microkernel for Armv8.2 dotprod: a 64-byte tile is four q-registers
// of 4 rows each; plane j of a register is 4 rows x 4 columns, and SDOT by lane j
// multiplies it by activation bytes 4j..4j+3 of the 16-byte activation vector.
#include <arm_neon.h>

#include "kernels/ternary_ukernels.h"

namespace tern {
namespace {

constexpr size_t kMaxTokens = 4;

template <size_t NT>
void block_t2i16_neondot_n(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, int32_t* out) {
  const uint8x16_t mask = vdupq_n_u8(3);
  int32x4_t acc[NT][4];
  for (size_t t = 0; t < NT; ++t)
    for (size_t m = 0; m < 4; ++m) acc[t][m] = vdupq_n_s32(0);

  auto tile = [&](const uint8_t* w, const int8_t* qp, size_t stride) {
    int8x16_t a[NT];
    for (size_t t = 0; t < NT; ++t) a[t] = vld1q_s8(qp + t * stride);
    // Fully unrolled so the accumulators live in registers.
#pragma GCC unroll 4
    for (size_t m = 0; m < 4; ++m) {
      const uint8x16_t packed = vld1q_u8(w + 16 * m);
      const int8x16_t w0 = vreinterpretq_s8_u8(vandq_u8(packed, mask));
      const int8x16_t w1 = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(packed, 2), mask));
      const int8x16_t w2 = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(packed, 4), mask));
      const int8x16_t w3 = vreinterpretq_s8_u8(vshrq_n_u8(packed, 6));
      for (size_t t = 0; t < NT; ++t) {
        acc[t][m] = vdotq_laneq_s32(acc[t][m], w0, a[t], 0);
        acc[t][m] = vdotq_laneq_s32(acc[t][m], w1, a[t], 1);
        acc[t][m] = vdotq_laneq_s32(acc[t][m], w2, a[t], 2);
        acc[t][m] = vdotq_laneq_s32(acc[t][m], w3, a[t], 3);
      }
    }
  };

  // One loop over every tile, the last one reading zero-padded activations when K is
  // not a multiple of 16: a single copy of the body keeps the accumulators in registers.
  const size_t full = cols / kT2iBlockCols;
  const size_t k_tiles = (cols + kT2iBlockCols - 1) / kT2iBlockCols;
  int8_t tail[NT * kT2iBlockCols];
  if (k_tiles != full) t2i_copy_tail(q, q_stride, NT, cols, tail);
  for (size_t kt = 0; kt < k_tiles; ++kt) {
    const bool padded = kt == full;
    tile(block + kt * kT2iTileBytes, padded ? tail : q + kt * kT2iBlockCols, padded ? kT2iBlockCols : q_stride);
  }
  for (size_t t = 0; t < NT; ++t)
    for (size_t m = 0; m < 4; ++m) vst1q_s32(out + t * kT2iBlockRows + 4 * m, acc[t][m]);
}

void block_t2i16_neondot(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, size_t tokens,
                         int32_t* out) {
  switch (tokens) {
    case 1: return block_t2i16_neondot_n<1>(block, cols, q, q_stride, out);
    case 2: return block_t2i16_neondot_n<2>(block, cols, q, q_stride, out);
    case 3: return block_t2i16_neondot_n<3>(block, cols, q, q_stride, out);
    default: return block_t2i16_neondot_n<4>(block, cols, q, q_stride, out);
  }
}

}  // namespace

const TernaryBlockKernelInfo ternary_block_t2i16__neondot = {block_t2i16_neondot, kMaxTokens};

}  // namespace tern
