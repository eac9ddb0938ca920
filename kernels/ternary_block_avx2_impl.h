// The AVX2 microkernel loop over both tile layouts (ternary_block_{t2i16,t3i16}__avx2.cpp),
// templates on the layout's plane decoder (T2iPlanes, T3iPlanes). Internal linkage: each file
// compiles its own copy with its own ISA flags. A 64-byte tile is two ymm halves (rows 0-7,
// 8-15); plane j of a half is 8 rows x columns 4j..4j+3 as unsigned bytes code + 1. PMADDUBSW
// multiplies a plane by the broadcast activation bytes into int16 pairs (at most
// 2 * 2 * 128), which add up in int16 over several tiles before one PMADDWD widens them to
// int32 rows.
#pragma once

#include <immintrin.h>

#include <cstring>

#include "kernels/ternary_ukernels.h"

namespace tern {
namespace ternary_avx2 {
namespace {

inline __m256i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// The same, loaded again at every use: GCC would otherwise keep a tile's NT x kCount
// broadcasts live, more than the 16 ymm registers, and spill the accumulators with them.
// A load per use is cheaper than a spill and reload.
inline __m256i broadcast4_each_use(const int8_t* p) {
  __m256i v;
  __asm__ volatile("vpbroadcastd %1, %0" : "=x"(v) : "m"(*reinterpret_cast<const int32_t*>(p)));
  return v;
}

// The layouts' plane decoders: next(state, j) gives plane j of one ymm half of a Tiles tile, the
// state starting as the half's bytes and advanced by each call, j = 0, 1, ... kCount - 1.

// 2 bits per plane: plane j is the bytes shifted right by 2j (16-bit lanes), masked.
struct T2iPlanes {
  using Tiles = T2iTiles;
  static constexpr size_t kCount = 4;
  static __m256i next(__m256i& state, size_t j) {
    if (j > 0) state = _mm256_srli_epi16(state, 2);
    return _mm256_and_si256(state, _mm256_set1_epi8(3));
  }
};

// Base 3 (ternary_base3.h). AVX2 has no byte multiply or byte shift, so p * 3 is two byte
// adds and digit floor(3p / 256) is (p >= 86) + (p >= 171) from two unsigned compares
// (max + cmpeq).
struct T3iPlanes {
  using Tiles = T3iTiles;
  static constexpr size_t kCount = kT3iDigits;
  static __m256i at_least(__m256i p, __m256i k) { return _mm256_cmpeq_epi8(_mm256_max_epu8(p, k), p); }
  static __m256i next(__m256i& p, size_t j) {
    if (j > 0) p = _mm256_add_epi8(p, _mm256_add_epi8(p, p));
    const __m256i k86 = _mm256_set1_epi8(86), k171 = _mm256_set1_epi8(static_cast<char>(171));
    return _mm256_sub_epi8(_mm256_setzero_si256(), _mm256_add_epi8(at_least(p, k86), at_least(p, k171)));
  }
};

constexpr size_t kMaxTokens = 8;
// Weights are prefetched 2 KB ahead, by the one-token loop (ternary_block_t2i16__avx2.cpp) and
// by the token tiles: a 5-token pass (verifying 4 drafts) over 2B-4T matrices streamed from DRAM
// ran 1.08-1.16x faster with it (AVX2 path on the Zen 5 VM, tern-kernel-bench tokens:5 streamed:1).
constexpr size_t kPrefetchBytes = 2048;

// Tiles whose int16 sums can stay unwidened: a PMADDUBSW pair lies in [-2 * 2 * 128, 2 * 2 * 127],
// a tile adds kCount of them per lane, and the lane must stay within [-32768, 32767] (16 tiles
// of 2-bit planes, 12 of base-3 ones).
template <typename P>
constexpr size_t kTilesPerWiden = 32768 / (P::kCount * 2 * 2 * 128);

// NT tokens x 16 rows, one ymm half (8 rows) per pass over the block. Each plane's products go
// straight into one int16 accumulator per token, which PMADDWD widens once per kTilesPerWiden
// tiles: per half-tile and token that is kCount multiplies and kCount adds, plus the plane
// decoding the tokens share. One half per pass leaves registers for 8 tokens, so the decoding
// is shared twice as widely as with both halves and 4 tokens: 71 vector ALU instructions per
// 8 x 256 weight-MACs instead of 78 (t2i16; base-3 120 instead of 160). llvm-mca's Zen 3
// model, which also counts each broadcast on the vector pipes, puts both at 26.5 cycles for
// t2i16 and base-3 at 39.6 instead of 44; on the Zen 5 VM's AVX2 path 1-2 % faster for prefill,
// 4-6 % for 5 tokens (tern-kernel-bench, hot weights). (A PMADDWD per tile, before that,
// kept the multiply pipes a fifth busier: 37.5 llvm-mca cycles per 4-token tile on Zen 3
// against 28.)
//
// GCC needs three nudges to keep the NT accumulators in registers: the loops unrolled
// (an indexed accumulator lives in memory), each add pinned in order (otherwise it sums the
// products as a tree and spills the partial sums) and each broadcast loaded where it is used.
template <typename P, size_t NT>
void block_n(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, int32_t* out) {
  using Tiles = typename P::Tiles;
  const __m256i ones16 = _mm256_set1_epi16(1);
  const size_t full = cols / Tiles::kCols;
  int8_t tail[NT * Tiles::kCols];
  if (full * Tiles::kCols != cols) copy_tail<Tiles>(q, q_stride, NT, cols, tail);
  for (size_t h = 0; h < 2; ++h) {
    __m256i acc[NT];
    for (size_t t = 0; t < NT; ++t) acc[t] = _mm256_setzero_si256();
    auto tiles = [&](size_t kt0, size_t kt1, const int8_t* qp, size_t stride) __attribute__((always_inline)) {
      __m256i sum16[NT];
      for (size_t t = 0; t < NT; ++t) sum16[t] = _mm256_setzero_si256();
      const int8_t* a[NT];  // each token's activations for the current tile
      for (size_t t = 0; t < NT; ++t) a[t] = qp + t * stride;
      const uint8_t* const end = block + kt1 * Tiles::kBytes + 32 * h;
      for (const uint8_t* w = block + kt0 * Tiles::kBytes + 32 * h; w != end; w += Tiles::kBytes) {
        _mm_prefetch(reinterpret_cast<const char*>(w + kPrefetchBytes), _MM_HINT_T0);
        __m256i state = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
#pragma GCC unroll 8
        for (size_t j = 0; j < P::kCount; ++j) {
          const __m256i plane = P::next(state, j);
#pragma GCC unroll 8
          for (size_t t = 0; t < NT; ++t) {
            sum16[t] = _mm256_add_epi16(sum16[t], _mm256_maddubs_epi16(plane, broadcast4_each_use(a[t] + 4 * j)));
            __asm__("" : "+x"(sum16[t]));  // no reassociation across this add
          }
        }
        for (size_t t = 0; t < NT; ++t) a[t] += Tiles::kCols;
      }
      for (size_t t = 0; t < NT; ++t) acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(sum16[t], ones16));
    };
    for (size_t kt = 0; kt < full; kt += kTilesPerWiden<P>) {
      const size_t end = full - kt < kTilesPerWiden<P> ? full : kt + kTilesPerWiden<P>;
      tiles(kt, end, q + kt * Tiles::kCols, q_stride);
    }
    if (full * Tiles::kCols != cols) tiles(full, full + 1, tail, Tiles::kCols);  // zero-padded activations
    for (size_t t = 0; t < NT; ++t)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + t * Tiles::kRows + 8 * h), acc[t]);
  }
}

}  // namespace
}  // namespace ternary_avx2
}  // namespace tern
