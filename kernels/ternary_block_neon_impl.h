// The Arm microkernels' loops over both tile layouts (ternary_block_{t2i16,t3i16}__{neon,
// neondot}.cpp, and the planes for ...__neoni8mm.cpp), templates on the layout's plane
// decoder (T2iPlanes, T3iPlanes). Internal linkage: each file compiles its own copy with its own ISA flags. A
// 64-byte tile is four q-registers of 4 rows each; plane j of a register is 4 rows x columns
// 4j..4j+3 as bytes code + 1.
#pragma once

#include <arm_neon.h>

#include <cstring>

#include "kernels/ternary_ukernels.h"

namespace tern {
namespace ternary_neon {
namespace {

// v unchanged, as bytes the compiler cannot see through (an empty asm statement: no
// instruction). Clang 14 rewrites vget_high_s8 of a vector reinterpreted from int32 lanes (a
// duplicated 4-byte activation group) as an extract of 2 int32 lanes, which its SMULL2 /
// SMLAL2 patterns do not match: each vmull_high_s8 / vmlal_high_s8 then costs an EXT on
// either operand. Clang 19 matches them either way, and the statement costs it nothing. GCC
// matches them too but schedules its loops worse around the statement, so it does not get it.
inline int8x16_t opaque_bytes(int8x16_t v) {
#if defined(__clang__)
  __asm__("" : "+w"(v));
#endif
  return v;
}

// The layouts' plane decoders: decode(register, w) gives the kCount planes of one 4-row
// register of a Tiles tile.

// 2 bits per plane: masks and shifts.
struct T2iPlanes {
  using Tiles = T2iTiles;
  static constexpr int kCount = 4;
  static void decode(uint8x16_t packed, int8x16_t* w) {
    const uint8x16_t mask = vdupq_n_u8(3);
    w[0] = vreinterpretq_s8_u8(vandq_u8(packed, mask));
    w[1] = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(packed, 2), mask));
    w[2] = vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(packed, 4), mask));
    w[3] = vreinterpretq_s8_u8(vshrq_n_u8(packed, 6));
  }
};

// Base 3 (ternary_base3.h): digit j is floor(3 * (p * 3^j mod 256) / 256), and
// floor(3p / 256) = floor(floor(3p / 4) / 64) with floor(3p / 4) = hadd(p, p >> 1) (halving
// add keeps the 9th bit): the digit without widening.
struct T3iPlanes {
  using Tiles = T3iTiles;
  static constexpr int kCount = static_cast<int>(kT3iDigits);
  static int8x16_t digit_of(uint8x16_t p) { return vreinterpretq_s8_u8(vshrq_n_u8(vhaddq_u8(p, vshrq_n_u8(p, 1)), 6)); }
  static void decode(uint8x16_t p, int8x16_t* w) {
    const uint8x16_t three = vdupq_n_u8(3);
    w[0] = digit_of(p);
#pragma GCC unroll 4
    for (int j = 1; j < kCount; ++j) {
      p = vmulq_u8(p, three);
      w[j] = digit_of(p);
    }
  }
};

// Activation bytes 16..19 of a base-3 tile's row (plane 4) in every 32-bit lane.
inline int8x16_t fifth_group(const int8_t* row) {
  int32_t last;
  std::memcpy(&last, row + 16, 4);
  return vreinterpretq_s8_s32(vdupq_n_s32(last));
}

// Plain Armv8 NEON (Cortex-A72, no dotprod): SMULL / SMLAL multiply each plane by its
// activation group duplicated to 4 lanes, summing the planes in int16 (at most 5 * 2 * 128);
// ADDP + SADALP then fold each row's 4 lanes into int32.
struct Smull {
  static constexpr size_t kMaxTokens = 2;
  template <int N>
  struct Acts {
    int8x16_t group[N];
  };
  static int8x16_t dup_group(int8x16_t a, int lane) {
    const int32x4_t v = vreinterpretq_s32_s8(a);
    switch (lane) {
      case 0: return vreinterpretq_s8_s32(vdupq_laneq_s32(v, 0));
      case 1: return vreinterpretq_s8_s32(vdupq_laneq_s32(v, 1));
      case 2: return vreinterpretq_s8_s32(vdupq_laneq_s32(v, 2));
      default: return vreinterpretq_s8_s32(vdupq_laneq_s32(v, 3));
    }
  }
  template <int N>
  static Acts<N> acts(const int8_t* row) {
    Acts<N> a;
    const int8x16_t v = vld1q_s8(row);
    for (int j = 0; j < 4; ++j) a.group[j] = opaque_bytes(dup_group(v, j));
    if constexpr (N > 4) a.group[4] = opaque_bytes(fifth_group(row));
    return a;
  }
  template <int N>
  static int32x4_t dot(int32x4_t acc, const int8x16_t* w, const Acts<N>& a) {
    int16x8_t lo = vmull_s8(vget_low_s8(w[0]), vget_low_s8(a.group[0]));
    int16x8_t hi = vmull_high_s8(w[0], a.group[0]);
#pragma GCC unroll 4
    for (int j = 1; j < N; ++j) {
      lo = vmlal_s8(lo, vget_low_s8(w[j]), vget_low_s8(a.group[j]));
      hi = vmlal_high_s8(hi, w[j], a.group[j]);
    }
    // lo: rows 0,1 (4 lanes each); hi: rows 2,3. ADDP leaves 2 lanes per row.
    return vpadalq_s16(acc, vpaddq_s16(lo, hi));
  }
};

// Armv8.2 dotprod (only in files built with it): SDOT by lane j multiplies plane j by
// activation bytes 4j..4j+3 of the 16-byte activation vector (a base-3 plane 4: bytes
// 16..19, a second register).
struct Sdot {
  static constexpr size_t kMaxTokens = 4;
  template <int N>
  struct Acts {
    int8x16_t bytes, fifth;
  };
  template <int N>
  static Acts<N> acts(const int8_t* row) {
    Acts<N> a;
    a.bytes = vld1q_s8(row);
    if constexpr (N > 4) a.fifth = fifth_group(row);
    return a;
  }
  template <int N>
  static int32x4_t dot(int32x4_t acc, const int8x16_t* w, const Acts<N>& a) {
    acc = vdotq_laneq_s32(acc, w[0], a.bytes, 0);
    acc = vdotq_laneq_s32(acc, w[1], a.bytes, 1);
    acc = vdotq_laneq_s32(acc, w[2], a.bytes, 2);
    acc = vdotq_laneq_s32(acc, w[3], a.bytes, 3);
    if constexpr (N > 4) acc = vdotq_laneq_s32(acc, w[4], a.fifth, 0);
    return acc;
  }
};

// The block loop: per tile, each token's activations are prepared once (Dot::acts) and each
// 4-row register's planes decoded once for every token. Out of line, one symbol per token
// count, so kernels/tools/extract_loop.py finds each loop by name (one call per row block).
template <typename P, typename Dot, size_t NT>
__attribute__((noinline)) void block_n(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride,
                                       int32_t* out) {
  using Tiles = typename P::Tiles;
  int32x4_t acc[NT][4];
  for (size_t t = 0; t < NT; ++t)
    for (size_t m = 0; m < 4; ++m) acc[t][m] = vdupq_n_s32(0);

  for_each_tile<Tiles, NT>(block, cols, q, q_stride, [&](const uint8_t* w, const int8_t* qp, size_t stride) {
    typename Dot::template Acts<P::kCount> a[NT];
    for (size_t t = 0; t < NT; ++t) a[t] = Dot::template acts<P::kCount>(qp + t * stride);
      // Fully unrolled so the accumulators live in registers.
#pragma GCC unroll 4
    for (size_t m = 0; m < 4; ++m) {
      int8x16_t wp[P::kCount];
      P::decode(vld1q_u8(w + 16 * m), wp);
      for (size_t t = 0; t < NT; ++t) acc[t][m] = Dot::template dot<P::kCount>(acc[t][m], wp, a[t]);
    }
  });
  for (size_t t = 0; t < NT; ++t)
    for (size_t m = 0; m < 4; ++m) vst1q_s32(out + t * Tiles::kRows + 4 * m, acc[t][m]);
}

// The kernel for 1..Dot::kMaxTokens tokens.
template <typename P, typename Dot>
void block_tokens(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, size_t tokens, int32_t* out) {
  auto run = [&](auto nt) { block_n<P, Dot, decltype(nt)::value>(block, cols, q, q_stride, out); };
  if constexpr (Dot::kMaxTokens == 2) {
    with_constant<size_t, 1, 2>(tokens, run);
  } else {
    with_constant<size_t, 1, 2, 3, Dot::kMaxTokens>(tokens, run);
  }
}

template <typename P, typename Dot>
constexpr TernaryBlockKernelInfo kernel() {
  return {block_tokens<P, Dot>, Dot::kMaxTokens};
}

}  // namespace
}  // namespace ternary_neon
}  // namespace tern
