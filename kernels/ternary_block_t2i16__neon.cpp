// T2Interleaved16 microkernel for plain Armv8 NEON (Cortex-A72, no dotprod): SMULL /
// SMLAL multiply each plane (4 rows x 4 columns, weights code + 1) by its activation
// group duplicated to 4 lanes, summing the 4 planes in int16 (at most 4 * 2 * 128);
// ADDP + SADALP then fold each row's 4 lanes into int32 (ternary_block_neon_impl.h).
// One token has its own loop.
#include "kernels/ternary_block_neon_impl.h"

namespace tern {
namespace {

// Decode (one token) on a core whose two ASIMD pipes are the limit (in LLVM's Cortex-A57/A72
// model the multiplies issue on one of them, at most 8 products an instruction). The block loop
// above spends, per 4-row register and tile, 8 SMULL/SMLAL, 6 instructions decoding planes, 2
// folding int16 into int32 and a share of the activation duplicates. Here each 4-row register
// runs over all tiles on its own (the block's 10-27 KB stay in L1/L2 for the next register):
// - the 4 activation groups come duplicated from memory (one LD4R),
// - the planes are masked in place: 0x03 and 0x0C of the bytes, and of the bytes shifted by 4
//   as 16-bit lanes (the model issues that shift on the non-multiplying pipe, a byte shift on
//   the multiplying one; the mask drops what the neighbouring byte shifts in). Planes 1 and 3
//   come out 4x their value (x4), planes 0 and 2 as they are (x1),
// - the products add up in int16 per scale over 16 tiles and SADALP folds them into int32:
//   an x4 plane's lane gains at most 8 * 128 = 1024 in magnitude a tile, so 16 tiles stay
//   within int16 with room to spare (one chain per plane, so each waits one SMLAL a tile).
// 8 SMLAL and 8 other ASIMD instructions per register and tile, from 18. Each group goes
// through ternary_neon::opaque_bytes (no instruction), else clang 14 emits EXT + SMLAL for
// every vmlal_high_s8: 8 EXT per register and tile, 12 cycles instead of 8 on the A72 model.
// Out of line, so the loop is found by its symbol (kernels/tools/extract_loop.py).
__attribute__((noinline)) void block_t2i16_smull_1(const uint8_t* block, size_t cols, const int8_t* q, int32_t* out) {
  constexpr size_t kTilesPerFold = 16;
  const size_t full = cols / kT2iBlockCols;
  const uint8x16_t m03 = vdupq_n_u8(0x03), m0c = vdupq_n_u8(0x0c);
  for (size_t m = 0; m < 4; ++m) {
    // [x1, x4] x [rows 0,1 | rows 2,3], each row in two int32 lanes until the end.
    int32x4_t s[2][2];
    for (size_t c = 0; c < 2; ++c) s[c][0] = s[c][1] = vdupq_n_s32(0);
    int16x8_t x[4][2];  // per plane: one SMLAL latency per tile on each chain
    auto tile = [&](const uint8_t* w, const int8_t* a) __attribute__((always_inline)) {
      const int32x4x4_t d = vld4q_dup_s32(reinterpret_cast<const int32_t*>(a));  // group j in lanes of d.val[j]
      const uint8x16_t p = vld1q_u8(w);
      const uint8x16_t hi = vreinterpretq_u8_u16(vshrq_n_u16(vreinterpretq_u16_u8(p), 4));
      const int8x16_t planes[4] = {vreinterpretq_s8_u8(vandq_u8(p, m03)), vreinterpretq_s8_u8(vandq_u8(p, m0c)),
                                   vreinterpretq_s8_u8(vandq_u8(hi, m03)), vreinterpretq_s8_u8(vandq_u8(hi, m0c))};
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const int8x16_t g = ternary_neon::opaque_bytes(vreinterpretq_s8_s32(d.val[j]));
        x[j][0] = vmlal_s8(x[j][0], vget_low_s8(planes[j]), vget_low_s8(g));
        x[j][1] = vmlal_high_s8(x[j][1], planes[j], g);
      }
    };
    auto fold = [&]() __attribute__((always_inline)) {
      for (size_t c = 0; c < 2; ++c) {  // planes c and c + 2 share a scale
        s[c][0] = vpadalq_s16(vpadalq_s16(s[c][0], x[c][0]), x[c + 2][0]);
        s[c][1] = vpadalq_s16(vpadalq_s16(s[c][1], x[c][1]), x[c + 2][1]);
      }
    };
    const uint8_t* w = block + 16 * m;
    const int8_t* a = q;
    for (size_t kt0 = 0; kt0 < full; kt0 += kTilesPerFold) {
      const size_t n = full - kt0 < kTilesPerFold ? full - kt0 : kTilesPerFold;
      for (size_t j = 0; j < 4; ++j) x[j][0] = x[j][1] = vdupq_n_s16(0);
      for (size_t i = 0; i < n; ++i, w += kT2iTileBytes, a += kT2iBlockCols) tile(w, a);
      fold();
    }
    if (full * kT2iBlockCols != cols) {  // the last, partial tile reads zero-padded activations
      int8_t tail[kT2iBlockCols];
      copy_tail<T2iTiles>(q, kT2iBlockCols, 1, cols, tail);
      for (size_t j = 0; j < 4; ++j) x[j][0] = x[j][1] = vdupq_n_s16(0);
      tile(w, tail);
      fold();
    }
    // Lanes [r0, r0, r1, r1] and [r2, r2, r3, r3] -> [r0, r1, r2, r3] per scale; x4 comes back down.
    const int32x4_t x1 = vpaddq_s32(s[0][0], s[0][1]), x4 = vpaddq_s32(s[1][0], s[1][1]);
    vst1q_s32(out + 4 * m, vaddq_s32(x1, vshrq_n_s32(x4, 2)));
  }
}

void block_t2i16_neon(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, size_t tokens,
                      int32_t* out) {
  if (tokens == 1) return block_t2i16_smull_1(block, cols, q, out);
  ternary_neon::block_tokens<ternary_neon::T2iPlanes, ternary_neon::Smull>(block, cols, q, q_stride, tokens, out);
}

}  // namespace

const TernaryBlockKernelInfo ternary_block_t2i16__neon = {block_t2i16_neon, ternary_neon::Smull::kMaxTokens};

}  // namespace tern
