// T2Interleaved16 microkernel for Armv8.2 dotprod: a 64-byte tile is four q-registers
// of 4 rows each; plane j of a register is 4 rows x 4 columns, and SDOT by lane j
// multiplies it by activation bytes 4j..4j+3 of the 16-byte activation vector
// (ternary_block_neon_impl.h). One token has its own loop.
#include "kernels/ternary_block_neon_impl.h"

namespace tern {
namespace {

// Decode (one token) is bound by the two ASIMD pipes: 4 SDOT per register and, shifting and
// masking every plane down, 6 more. Here planes 1 and 2 are masked in place (AND 0x0C and 0x30
// leave 4x and 16x the plane's value, both still positive int8) and plane 3 is one shift, so a
// register costs 4 instructions besides its SDOTs: 32 ASIMD instructions per tile instead of 40
// (16 against 20 llvm-mca cycles on the Cortex-A76 model). Planes 0 and 3 share an accumulator
// (x1); planes 1 and 2 each have one (x4, x16), whose sums are exact multiples of 4 and 16 and
// come back down by an arithmetic shift. |x16| <= 16 * 2 * 128 * 4 per tile fits int32 for
// K < 16 million. Out of line, so the loop is found by its symbol (kernels/tools/extract_loop.py).
__attribute__((noinline)) void block_t2i16_sdot_1(const uint8_t* block, size_t cols, const int8_t* q, int32_t* out) {
  int32x4_t x1[4], x4[4], x16[4];
  for (size_t m = 0; m < 4; ++m) x1[m] = x4[m] = x16[m] = vdupq_n_s32(0);
  const uint8x16_t m03 = vdupq_n_u8(0x03), m0c = vdupq_n_u8(0x0c), m30 = vdupq_n_u8(0x30);
  for_each_tile<T2iTiles, 1>(block, cols, q, kT2iBlockCols, [&](const uint8_t* w, const int8_t* qp, size_t) {
    const int8x16_t a = vld1q_s8(qp);
    // All 16 planes first, then the SDOTs plane by plane: an in-order core (Cortex-A55) then
    // does not wait on each plane's AND right before its SDOT (clang's loop, llvm-mca A55
    // model: 59 -> 52 cycles a tile; GCC's and the out-of-order cores' unchanged).
    int8x16_t w8[4][4];
#pragma GCC unroll 4
    for (size_t m = 0; m < 4; ++m) {
      const uint8x16_t p = vld1q_u8(w + 16 * m);
      w8[m][0] = vreinterpretq_s8_u8(vandq_u8(p, m03));
      w8[m][1] = vreinterpretq_s8_u8(vandq_u8(p, m0c));
      w8[m][2] = vreinterpretq_s8_u8(vandq_u8(p, m30));
      w8[m][3] = vreinterpretq_s8_u8(vshrq_n_u8(p, 6));
    }
#pragma GCC unroll 4
    for (size_t m = 0; m < 4; ++m) x1[m] = vdotq_laneq_s32(x1[m], w8[m][0], a, 0);
#pragma GCC unroll 4
    for (size_t m = 0; m < 4; ++m) x4[m] = vdotq_laneq_s32(x4[m], w8[m][1], a, 1);
#pragma GCC unroll 4
    for (size_t m = 0; m < 4; ++m) x16[m] = vdotq_laneq_s32(x16[m], w8[m][2], a, 2);
#pragma GCC unroll 4
    for (size_t m = 0; m < 4; ++m) x1[m] = vdotq_laneq_s32(x1[m], w8[m][3], a, 3);
  });
  for (size_t m = 0; m < 4; ++m)
    vst1q_s32(out + 4 * m, vaddq_s32(x1[m], vaddq_s32(vshrq_n_s32(x4[m], 2), vshrq_n_s32(x16[m], 4))));
}

void block_t2i16_neondot(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, size_t tokens,
                         int32_t* out) {
  if (tokens == 1) return block_t2i16_sdot_1(block, cols, q, out);
  ternary_neon::block_tokens<ternary_neon::T2iPlanes, ternary_neon::Sdot>(block, cols, q, q_stride, tokens, out);
}

}  // namespace

const TernaryBlockKernelInfo ternary_block_t2i16__neondot = {block_t2i16_neondot, ternary_neon::Sdot::kMaxTokens};

}  // namespace tern
