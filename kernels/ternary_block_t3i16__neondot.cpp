// Base-3 tile microkernel for Armv8.2 dotprod (ternary_base3.h): each of the four
// q-registers of a tile (4 rows) yields five digit planes by multiply-shift, and plane j
// goes to SDOT by lane against activation bytes 4j..4j+3 (plane 4: bytes 16..19, a
// second register).
#include <arm_neon.h>

#include <cstring>

#include "kernels/ternary_base3.h"
#include "kernels/ternary_ukernels.h"

namespace tern {
namespace {

constexpr size_t kMaxTokens = 4;

// floor(3p / 256) = floor(floor(3p / 4) / 64), and floor(3p / 4) = hadd(p, p >> 1)
// (halving add keeps the 9th bit): the digit without widening.
inline int8x16_t digit_of(uint8x16_t p) {
  return vreinterpretq_s8_u8(vshrq_n_u8(vhaddq_u8(p, vshrq_n_u8(p, 1)), 6));
}

template <size_t NT>
void block_t3i16_neondot_n(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, int32_t* out) {
  const uint8x16_t three = vdupq_n_u8(3);
  int32x4_t acc[NT][4];
  for (size_t t = 0; t < NT; ++t)
    for (size_t m = 0; m < 4; ++m) acc[t][m] = vdupq_n_s32(0);

  auto tile = [&](const uint8_t* w, const int8_t* qp, size_t stride) {
    int8x16_t a[NT], b[NT];
    for (size_t t = 0; t < NT; ++t) {
      a[t] = vld1q_s8(qp + t * stride);
      int32_t last;
      std::memcpy(&last, qp + t * stride + 16, 4);
      b[t] = vreinterpretq_s8_s32(vdupq_n_s32(last));
    }
#pragma GCC unroll 4
    for (size_t m = 0; m < 4; ++m) {
      uint8x16_t p = vld1q_u8(w + 16 * m);
      const int8x16_t w0 = digit_of(p);
      p = vmulq_u8(p, three);
      const int8x16_t w1 = digit_of(p);
      p = vmulq_u8(p, three);
      const int8x16_t w2 = digit_of(p);
      p = vmulq_u8(p, three);
      const int8x16_t w3 = digit_of(p);
      p = vmulq_u8(p, three);
      const int8x16_t w4 = digit_of(p);
      for (size_t t = 0; t < NT; ++t) {
        acc[t][m] = vdotq_laneq_s32(acc[t][m], w0, a[t], 0);
        acc[t][m] = vdotq_laneq_s32(acc[t][m], w1, a[t], 1);
        acc[t][m] = vdotq_laneq_s32(acc[t][m], w2, a[t], 2);
        acc[t][m] = vdotq_laneq_s32(acc[t][m], w3, a[t], 3);
        acc[t][m] = vdotq_laneq_s32(acc[t][m], w4, b[t], 0);
      }
    }
  };

  // The last tile reads zero-padded activations when K is not a multiple of 20.
  const size_t full = cols / kT3iBlockCols;
  const size_t k_tiles = (cols + kT3iBlockCols - 1) / kT3iBlockCols;
  int8_t tail[NT * kT3iBlockCols];
  if (k_tiles != full) t3i_copy_tail(q, q_stride, NT, cols, tail);
  for (size_t kt = 0; kt < k_tiles; ++kt) {
    const bool padded = kt == full;
    tile(block + kt * kT3iTileBytes, padded ? tail : q + kt * kT3iBlockCols, padded ? kT3iBlockCols : q_stride);
  }
  for (size_t t = 0; t < NT; ++t)
    for (size_t m = 0; m < 4; ++m) vst1q_s32(out + t * kT3iBlockRows + 4 * m, acc[t][m]);
}

void block_t3i16_neondot(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, size_t tokens,
                         int32_t* out) {
  switch (tokens) {
    case 1: return block_t3i16_neondot_n<1>(block, cols, q, q_stride, out);
    case 2: return block_t3i16_neondot_n<2>(block, cols, q, q_stride, out);
    case 3: return block_t3i16_neondot_n<3>(block, cols, q, q_stride, out);
    default: return block_t3i16_neondot_n<4>(block, cols, q, q_stride, out);
  }
}

}  // namespace

const TernaryBlockKernelInfo ternary_block_t3i16__neondot = {block_t3i16_neondot, kMaxTokens};

}  // namespace tern
