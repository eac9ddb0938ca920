// Base-3 tile microkernel for plain Armv8 NEON (Cortex-A72): the five digit planes of
// each 4-row register (multiply-shift, as in the dotprod kernel) go through SMULL/SMLAL
// against their activation group duplicated to 4 lanes, summed in int16 (at most
// 5 * 2 * 128), then folded into int32 with ADDP + SADALP as in the t2i16 kernel.
#include <arm_neon.h>

#include <cstring>

#include "kernels/ternary_base3.h"
#include "kernels/ternary_ukernels.h"

namespace tern {
namespace {

constexpr size_t kMaxTokens = 2;

inline int8x16_t digit_of(uint8x16_t p) {
  return vreinterpretq_s8_u8(vshrq_n_u8(vhaddq_u8(p, vshrq_n_u8(p, 1)), 6));
}

inline int8x16_t dup_group(int8x16_t a, int lane) {
  const int32x4_t v = vreinterpretq_s32_s8(a);
  switch (lane) {
    case 0: return vreinterpretq_s8_s32(vdupq_laneq_s32(v, 0));
    case 1: return vreinterpretq_s8_s32(vdupq_laneq_s32(v, 1));
    case 2: return vreinterpretq_s8_s32(vdupq_laneq_s32(v, 2));
    default: return vreinterpretq_s8_s32(vdupq_laneq_s32(v, 3));
  }
}

template <size_t NT>
void block_t3i16_neon_n(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, int32_t* out) {
  const uint8x16_t three = vdupq_n_u8(3);
  int32x4_t acc[NT][4];
  for (size_t t = 0; t < NT; ++t)
    for (size_t m = 0; m < 4; ++m) acc[t][m] = vdupq_n_s32(0);

  auto tile = [&](const uint8_t* w, const int8_t* qp, size_t stride) {
    int8x16_t a[NT][5];
    for (size_t t = 0; t < NT; ++t) {
      const int8x16_t v = vld1q_s8(qp + t * stride);
      for (int j = 0; j < 4; ++j) a[t][j] = dup_group(v, j);
      int32_t last;
      std::memcpy(&last, qp + t * stride + 16, 4);
      a[t][4] = vreinterpretq_s8_s32(vdupq_n_s32(last));
    }
#pragma GCC unroll 4
    for (size_t m = 0; m < 4; ++m) {
      uint8x16_t p = vld1q_u8(w + 16 * m);
      int8x16_t wd[5];
      wd[0] = digit_of(p);
      for (int j = 1; j < 5; ++j) {
        p = vmulq_u8(p, three);
        wd[j] = digit_of(p);
      }
      for (size_t t = 0; t < NT; ++t) {
        int16x8_t lo = vmull_s8(vget_low_s8(wd[0]), vget_low_s8(a[t][0]));
        int16x8_t hi = vmull_high_s8(wd[0], a[t][0]);
        for (int j = 1; j < 5; ++j) {
          lo = vmlal_s8(lo, vget_low_s8(wd[j]), vget_low_s8(a[t][j]));
          hi = vmlal_high_s8(hi, wd[j], a[t][j]);
        }
        acc[t][m] = vpadalq_s16(acc[t][m], vpaddq_s16(lo, hi));
      }
    }
  };

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

void block_t3i16_neon(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, size_t tokens,
                      int32_t* out) {
  if (tokens == 1) return block_t3i16_neon_n<1>(block, cols, q, q_stride, out);
  return block_t3i16_neon_n<2>(block, cols, q, q_stride, out);
}

}  // namespace

const TernaryBlockKernelInfo ternary_block_t3i16__neon = {block_t3i16_neon, kMaxTokens};

}  // namespace tern
