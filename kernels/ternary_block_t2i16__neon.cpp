// T2Interleaved16 microkernel for plain Armv8 NEON (Cortex-A72, no dotprod): SMULL /
// SMLAL multiply each plane (4 rows x 4 columns, weights code + 1) by its activation
// group duplicated to 4 lanes, summing the 4 planes in int16 (at most 4 * 2 * 128);
// ADDP + SADALP then fold each row's 4 lanes into int32.
#include <arm_neon.h>

#include "kernels/ternary_ukernels.h"

namespace tern {
namespace {

constexpr size_t kMaxTokens = 2;

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
void block_t2i16_neon_n(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, int32_t* out) {
  const uint8x16_t mask = vdupq_n_u8(3);
  int32x4_t acc[NT][4];
  for (size_t t = 0; t < NT; ++t)
    for (size_t m = 0; m < 4; ++m) acc[t][m] = vdupq_n_s32(0);

  auto tile = [&](const uint8_t* w, const int8_t* qp, size_t stride) {
    int8x16_t a[NT][4];
    for (size_t t = 0; t < NT; ++t) {
      const int8x16_t v = vld1q_s8(qp + t * stride);
      for (int j = 0; j < 4; ++j) a[t][j] = dup_group(v, j);
    }
    // Fully unrolled so the accumulators live in registers.
#pragma GCC unroll 4
    for (size_t m = 0; m < 4; ++m) {
      const uint8x16_t packed = vld1q_u8(w + 16 * m);
      const int8x16_t w0 = vreinterpretq_s8_u8(vandq_u8(packed, mask));
      const int8x16_t w1 = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(packed, 2), mask));
      const int8x16_t w2 = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(packed, 4), mask));
      const int8x16_t w3 = vreinterpretq_s8_u8(vshrq_n_u8(packed, 6));
      for (size_t t = 0; t < NT; ++t) {
        int16x8_t lo = vmull_s8(vget_low_s8(w0), vget_low_s8(a[t][0]));
        int16x8_t hi = vmull_high_s8(w0, a[t][0]);
        lo = vmlal_s8(lo, vget_low_s8(w1), vget_low_s8(a[t][1]));
        hi = vmlal_high_s8(hi, w1, a[t][1]);
        lo = vmlal_s8(lo, vget_low_s8(w2), vget_low_s8(a[t][2]));
        hi = vmlal_high_s8(hi, w2, a[t][2]);
        lo = vmlal_s8(lo, vget_low_s8(w3), vget_low_s8(a[t][3]));
        hi = vmlal_high_s8(hi, w3, a[t][3]);
        // lo: rows 0,1 (4 lanes each); hi: rows 2,3. ADDP leaves 2 lanes per row.
        acc[t][m] = vpadalq_s16(acc[t][m], vpaddq_s16(lo, hi));
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

void block_t2i16_neon(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, size_t tokens,
                      int32_t* out) {
  if (tokens == 1) return block_t2i16_neon_n<1>(block, cols, q, q_stride, out);
  return block_t2i16_neon_n<2>(block, cols, q, q_stride, out);
}

}  // namespace

const TernaryBlockKernelInfo ternary_block_t2i16__neon = {block_t2i16_neon, kMaxTokens};

}  // namespace tern
