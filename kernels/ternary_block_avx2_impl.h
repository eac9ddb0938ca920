// The AVX2 microkernel loop over both tile layouts (ternary_block_{t2i16,t3i16}__avx2.cpp),
// templates on the layout's plane decoder (T2iPlanes, T3iPlanes). Internal linkage: each file
// compiles its own copy with its own ISA flags. A 64-byte tile is two ymm halves (rows 0-7,
// 8-15); plane j of a half is 8 rows x columns 4j..4j+3 as unsigned bytes code + 1. PMADDUBSW
// multiplies a plane by the broadcast activation bytes into int16 pairs (at most
// 2 * 2 * 128), the planes are summed in int16 (at most 5 * 2 * 2 * 128) and one PMADDWD
// widens to int32 rows.
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

// The layouts' plane decoders: decode(half, w) gives the kCount planes of one ymm half of a
// Tiles tile.

// 2 bits per plane: plane j is the bytes shifted right by 2j (16-bit lanes), masked.
struct T2iPlanes {
  using Tiles = T2iTiles;
  static constexpr size_t kCount = 4;
  static void decode(__m256i packed, __m256i* w) {
    const __m256i mask = _mm256_set1_epi8(3);
    for (int j = 0; j < 4; ++j) w[j] = _mm256_and_si256(_mm256_srli_epi16(packed, 2 * j), mask);
  }
};

// Base 3 (ternary_base3.h). AVX2 has no byte multiply or byte shift, so p * 3 is two byte
// adds and digit floor(3p / 256) is (p >= 86) + (p >= 171) from two unsigned compares
// (max + cmpeq).
struct T3iPlanes {
  using Tiles = T3iTiles;
  static constexpr size_t kCount = kT3iDigits;
  static __m256i at_least(__m256i p, __m256i k) { return _mm256_cmpeq_epi8(_mm256_max_epu8(p, k), p); }
  static void decode(__m256i p, __m256i* w) {
    const __m256i k86 = _mm256_set1_epi8(86);
    const __m256i k171 = _mm256_set1_epi8(static_cast<char>(171));
    const __m256i zero = _mm256_setzero_si256();
    for (size_t j = 0; j < kCount; ++j) {
      if (j > 0) p = _mm256_add_epi8(p, _mm256_add_epi8(p, p));
      w[j] = _mm256_sub_epi8(zero, _mm256_add_epi8(at_least(p, k86), at_least(p, k171)));
    }
  }
};

constexpr size_t kMaxTokens = 4;

template <typename P, size_t NT>
void block_n(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, int32_t* out) {
  using Tiles = typename P::Tiles;
  const __m256i ones16 = _mm256_set1_epi16(1);
  __m256i acc[NT][2];
  for (size_t t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_si256();

  for_each_tile<Tiles, NT>(block, cols, q, q_stride, [&](const uint8_t* w, const int8_t* qp, size_t stride) {
    for (size_t h = 0; h < 2; ++h) {
      __m256i wp[P::kCount];
      P::decode(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32 * h)), wp);
      for (size_t t = 0; t < NT; ++t) {
        const int8_t* a = qp + t * stride;
        __m256i s = _mm256_maddubs_epi16(wp[0], broadcast4(a));
        for (size_t j = 1; j < P::kCount; ++j)
          s = _mm256_add_epi16(s, _mm256_maddubs_epi16(wp[j], broadcast4(a + 4 * j)));
        acc[t][h] = _mm256_add_epi32(acc[t][h], _mm256_madd_epi16(s, ones16));
      }
    }
  });
  for (size_t t = 0; t < NT; ++t) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + t * Tiles::kRows), acc[t][0]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + t * Tiles::kRows + 8), acc[t][1]);
  }
}

}  // namespace
}  // namespace ternary_avx2
}  // namespace tern
