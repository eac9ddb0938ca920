// Probe, not part of the runtime build: an exact TL1-style lookup-table loop for one
// token over T2Interleaved16 tiles on plain NEON (Cortex-A72: TBL, no SDOT), to compare
// with ternary_block_t2i16__neon.cpp under llvm-mca (README.md here). Same result
// contract as the block kernels: out[r] = sum_c (code(r, c) + 1) * q[c].
//
// Tables, built once per token (lut_build_tables) and shared by every row block: in a
// tile, the low nibble of byte 4r+m holds the codes + 1 of columns (m, m+4) and the high
// nibble those of (m+8, m+12), i.e. index = wa + 4 * wb with w = code + 1 in 0..2. For
// each of the 8 column pairs the table holds T = wa * qa + wb * qb (|T| <= 512, 10 bits),
// split exactly as T = 32 * A + B with A = T >> 5 in [-16, 15] and B = T & 31 in [0, 31]:
// two 16-byte TBL tables per pair, 256 bytes per 16 columns.
//
// Per tile the 4 x 16 bytes are transposed with TRN so that one vector holds column
// offset m for all 16 rows (a lookup table is shared by all lanes, and in the tile the
// pair changes with m); lane l then is row 4 * (l % 4) + l / 4. Per row and tile, the 8
// A values sum to [-128, 120] (int8) and the 8 B values to <= 248 (uint8); they are
// widened into int16 / uint16 once per tile, which holds 255 tiles (255 * 128 <= 32767,
// 255 * 248 <= 65535) before the chunk is widened to int32.
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tern_probe {

constexpr size_t kTileBytes = 64;
constexpr size_t kTableBytesPerTile = 256;  // 8 pairs x (A table + B table) x 16 bytes
constexpr size_t kChunkTiles = 255;         // int16 / uint16 accumulators stay exact

// tables must hold k_tiles * 256 bytes; q is zero-padded past cols.
void lut_build_tables(const int8_t* q, size_t cols, int8_t* tables) {
  const size_t k_tiles = (cols + 15) / 16;
  for (size_t kt = 0; kt < k_tiles; ++kt) {
    int8_t qt[16] = {};
    const size_t n = cols - kt * 16 < 16 ? cols - kt * 16 : 16;
    std::memcpy(qt, q + kt * 16, n);
    for (int p = 0; p < 8; ++p) {
      // Pair p: m = p % 4, nibble p / 4 (0: columns m, m+4; 1: columns m+8, m+12).
      const int m = p % 4, base = (p / 4) * 8;
      const int qa = qt[base + m], qb = qt[base + m + 4];
      int8_t* ta = tables + kt * kTableBytesPerTile + p * 32;
      for (int idx = 0; idx < 16; ++idx) {
        const int wa = idx & 3, wb = idx >> 2;
        const int t = (wa < 3 && wb < 3) ? wa * qa + wb * qb : 0;
        ta[idx] = static_cast<int8_t>(t >> 5);       // A, arithmetic shift
        ta[16 + idx] = static_cast<int8_t>(t & 31);  // B
      }
    }
  }
}

// The same tables with NEON, to put a number on the build cost (llvm-mca): per pair,
// T over the 16 indices as two int16x8 multiply-adds by the pair's activations, then
// A and B narrowed to bytes. Indices with a digit 3 get 0, as above.
__attribute__((noinline)) void lut_build_tables_neon(const int8_t* q, size_t cols, int8_t* tables) {
  static const int16_t kWa[16] = {0, 1, 2, 0, 0, 1, 2, 0, 0, 1, 2, 0, 0, 0, 0, 0};
  static const int16_t kWb[16] = {0, 0, 0, 0, 1, 1, 1, 0, 2, 2, 2, 0, 0, 0, 0, 0};
  const int16x8_t wa_lo = vld1q_s16(kWa), wa_hi = vld1q_s16(kWa + 8);
  const int16x8_t wb_lo = vld1q_s16(kWb), wb_hi = vld1q_s16(kWb + 8);
  const int16x8_t low5 = vdupq_n_s16(31);
  const size_t full = cols / 16, k_tiles = (cols + 15) / 16;
  int8_t tail[16] = {};
  std::memcpy(tail, q + full * 16, cols - full * 16);
  for (size_t kt = 0; kt < k_tiles; ++kt) {
    const int8_t* qt = kt < full ? q + kt * 16 : tail;
    int8_t* out = tables + kt * kTableBytesPerTile;
    for (int p = 0; p < 8; ++p) {
      const int16_t qa = qt[(p / 4) * 8 + p % 4];
      const int16_t qb = qt[(p / 4) * 8 + p % 4 + 4];
      const int16x8_t t_lo = vmlaq_n_s16(vmulq_n_s16(wa_lo, qa), wb_lo, qb);
      const int16x8_t t_hi = vmlaq_n_s16(vmulq_n_s16(wa_hi, qa), wb_hi, qb);
      vst1q_s8(out + p * 32, vcombine_s8(vmovn_s16(vshrq_n_s16(t_lo, 5)), vmovn_s16(vshrq_n_s16(t_hi, 5))));
      vst1q_s8(out + p * 32 + 16, vcombine_s8(vmovn_s16(vandq_s16(t_lo, low5)), vmovn_s16(vandq_s16(t_hi, low5))));
    }
  }
}

// A tile's 64 bytes transposed so u[m] holds, per row, the nibbles of weight pairs (m, m+4)
// (low) and (m+8, m+12) (high).
inline __attribute__((always_inline)) void tile_nibble_rows(const uint8_t* w, uint8x16_t u[4]) {
  const uint8x16_t w0 = vld1q_u8(w), w1 = vld1q_u8(w + 16), w2 = vld1q_u8(w + 32), w3 = vld1q_u8(w + 48);
  const uint8x16_t t0 = vtrn1q_u8(w0, w1), t1 = vtrn2q_u8(w0, w1);
  const uint8x16_t t2 = vtrn1q_u8(w2, w3), t3 = vtrn2q_u8(w2, w3);
  u[0] = vreinterpretq_u8_u16(vtrn1q_u16(vreinterpretq_u16_u8(t0), vreinterpretq_u16_u8(t2)));
  u[2] = vreinterpretq_u8_u16(vtrn2q_u16(vreinterpretq_u16_u8(t0), vreinterpretq_u16_u8(t2)));
  u[1] = vreinterpretq_u8_u16(vtrn1q_u16(vreinterpretq_u16_u8(t1), vreinterpretq_u16_u8(t3)));
  u[3] = vreinterpretq_u8_u16(vtrn2q_u16(vreinterpretq_u16_u8(t1), vreinterpretq_u16_u8(t3)));
}

// One 16-row block: k_tiles tiles of the block, tables from lut_build_tables.
__attribute__((noinline)) void lut_block_t2i16(const uint8_t* block, size_t k_tiles, const int8_t* tables,
                                               int32_t* out) {
  const uint8x16_t low4 = vdupq_n_u8(15);
  int32x4_t a32[4], b32[4];
  for (int i = 0; i < 4; ++i) a32[i] = b32[i] = vdupq_n_s32(0);
  for (size_t k0 = 0; k0 < k_tiles; k0 += kChunkTiles) {
    const size_t k1 = k_tiles - k0 < kChunkTiles ? k_tiles : k0 + kChunkTiles;
    int16x8_t a16_lo = vdupq_n_s16(0), a16_hi = vdupq_n_s16(0);
    uint16x8_t b16_lo = vdupq_n_u16(0), b16_hi = vdupq_n_u16(0);
    for (size_t kt = k0; kt < k1; ++kt) {
      const int8_t* t = tables + kt * kTableBytesPerTile;
      uint8x16_t u[4];
      tile_nibble_rows(block + kt * kTileBytes, u);
      int8x16_t a8[2], b8[2];  // two partial sums each to shorten the add chains
      for (int m = 0; m < 4; ++m) {
        const uint8x16_t lo = vandq_u8(u[m], low4), hi = vshrq_n_u8(u[m], 4);
        const int8_t* tl = t + m * 32;        // pair (m, m+4)
        const int8_t* th = t + (m + 4) * 32;  // pair (m+8, m+12)
        const int8x16_t a = vaddq_s8(vqtbl1q_s8(vld1q_s8(tl), lo), vqtbl1q_s8(vld1q_s8(th), hi));
        const int8x16_t b = vaddq_s8(vqtbl1q_s8(vld1q_s8(tl + 16), lo), vqtbl1q_s8(vld1q_s8(th + 16), hi));
        if (m < 2) {
          a8[m] = a;
          b8[m] = b;
        } else {
          a8[m - 2] = vaddq_s8(a8[m - 2], a);
          b8[m - 2] = vaddq_s8(b8[m - 2], b);
        }
      }
      const int8x16_t a = vaddq_s8(a8[0], a8[1]);
      const uint8x16_t b = vreinterpretq_u8_s8(vaddq_s8(b8[0], b8[1]));
      a16_lo = vaddw_s8(a16_lo, vget_low_s8(a));
      a16_hi = vaddw_high_s8(a16_hi, a);
      b16_lo = vaddw_u8(b16_lo, vget_low_u8(b));
      b16_hi = vaddw_high_u8(b16_hi, b);
    }
    a32[0] = vaddw_s16(a32[0], vget_low_s16(a16_lo));
    a32[1] = vaddw_high_s16(a32[1], a16_lo);
    a32[2] = vaddw_s16(a32[2], vget_low_s16(a16_hi));
    a32[3] = vaddw_high_s16(a32[3], a16_hi);
    b32[0] = vreinterpretq_s32_u32(vaddw_u16(vreinterpretq_u32_s32(b32[0]), vget_low_u16(b16_lo)));
    b32[1] = vreinterpretq_s32_u32(vaddw_high_u16(vreinterpretq_u32_s32(b32[1]), b16_lo));
    b32[2] = vreinterpretq_s32_u32(vaddw_u16(vreinterpretq_u32_s32(b32[2]), vget_low_u16(b16_hi)));
    b32[3] = vreinterpretq_s32_u32(vaddw_high_u16(vreinterpretq_u32_s32(b32[3]), b16_hi));
  }
  int32_t lanes[16];
  for (int i = 0; i < 4; ++i) vst1q_s32(lanes + 4 * i, vaddq_s32(vshlq_n_s32(a32[i], 5), b32[i]));
  for (int l = 0; l < 16; ++l) out[4 * (l % 4) + l / 4] = lanes[l];
}

// The same loop with 8-byte (D-form) lookups: llvm-mca's Cortex-A57 model, which it uses
// for the A72, gives a 16-byte TBL 3 pipe slots and an 8-byte one 1, at the cost of twice
// the byte adds. Same tables, lanes and bounds.
__attribute__((noinline)) void lut_block_t2i16_d(const uint8_t* block, size_t k_tiles, const int8_t* tables,
                                                 int32_t* out) {
  const uint8x16_t low4 = vdupq_n_u8(15);
  int32x4_t a32[4], b32[4];
  for (int i = 0; i < 4; ++i) a32[i] = b32[i] = vdupq_n_s32(0);
  for (size_t k0 = 0; k0 < k_tiles; k0 += kChunkTiles) {
    const size_t k1 = k_tiles - k0 < kChunkTiles ? k_tiles : k0 + kChunkTiles;
    int16x8_t a16_lo = vdupq_n_s16(0), a16_hi = vdupq_n_s16(0);
    uint16x8_t b16_lo = vdupq_n_u16(0), b16_hi = vdupq_n_u16(0);
    for (size_t kt = k0; kt < k1; ++kt) {
      const int8_t* t = tables + kt * kTableBytesPerTile;
      uint8x16_t u[4];
      tile_nibble_rows(block + kt * kTileBytes, u);
      int8x8_t a8[2][2], b8[2][2];  // [half][partial]
      for (int m = 0; m < 4; ++m) {
        const uint8x16_t lo = vandq_u8(u[m], low4), hi = vshrq_n_u8(u[m], 4);
        const int8x16_t tal = vld1q_s8(t + m * 32), tbl_ = vld1q_s8(t + m * 32 + 16);
        const int8x16_t tah = vld1q_s8(t + (m + 4) * 32), tbh = vld1q_s8(t + (m + 4) * 32 + 16);
        for (int h = 0; h < 2; ++h) {
          const uint8x8_t il = h ? vget_high_u8(lo) : vget_low_u8(lo);
          const uint8x8_t ih = h ? vget_high_u8(hi) : vget_low_u8(hi);
          const int8x8_t a = vadd_s8(vqtbl1_s8(tal, il), vqtbl1_s8(tah, ih));
          const int8x8_t b = vadd_s8(vqtbl1_s8(tbl_, il), vqtbl1_s8(tbh, ih));
          if (m < 2) {
            a8[h][m] = a;
            b8[h][m] = b;
          } else {
            a8[h][m - 2] = vadd_s8(a8[h][m - 2], a);
            b8[h][m - 2] = vadd_s8(b8[h][m - 2], b);
          }
        }
      }
      a16_lo = vaddw_s8(a16_lo, vadd_s8(a8[0][0], a8[0][1]));
      a16_hi = vaddw_s8(a16_hi, vadd_s8(a8[1][0], a8[1][1]));
      b16_lo = vaddw_u8(b16_lo, vreinterpret_u8_s8(vadd_s8(b8[0][0], b8[0][1])));
      b16_hi = vaddw_u8(b16_hi, vreinterpret_u8_s8(vadd_s8(b8[1][0], b8[1][1])));
    }
    a32[0] = vaddw_s16(a32[0], vget_low_s16(a16_lo));
    a32[1] = vaddw_high_s16(a32[1], a16_lo);
    a32[2] = vaddw_s16(a32[2], vget_low_s16(a16_hi));
    a32[3] = vaddw_high_s16(a32[3], a16_hi);
    b32[0] = vreinterpretq_s32_u32(vaddw_u16(vreinterpretq_u32_s32(b32[0]), vget_low_u16(b16_lo)));
    b32[1] = vreinterpretq_s32_u32(vaddw_high_u16(vreinterpretq_u32_s32(b32[1]), b16_lo));
    b32[2] = vreinterpretq_s32_u32(vaddw_u16(vreinterpretq_u32_s32(b32[2]), vget_low_u16(b16_hi)));
    b32[3] = vreinterpretq_s32_u32(vaddw_high_u16(vreinterpretq_u32_s32(b32[3]), b16_hi));
  }
  int32_t lanes[16];
  for (int i = 0; i < 4; ++i) vst1q_s32(lanes + 4 * i, vaddq_s32(vshlq_n_s32(a32[i], 5), b32[i]));
  for (int l = 0; l < 16; ++l) out[4 * (l % 4) + l / 4] = lanes[l];
}

}  // namespace tern_probe
