// T2Interleaved16 microkernel for AVX2: a 64-byte tile is two ymm halves (rows 0-7,
// rows 8-15). PMADDUBSW multiplies the unsigned weights (code + 1) by the broadcast
// activation bytes into int16 pairs (at most 2 * 2 * 128, no saturation), summed in int16
// over up to 16 tiles before one PMADDWD widens them to int32 rows (ternary_block_avx2_impl.h,
// shared with the base-3 kernel); one token has its own loop.
#include "kernels/ternary_block_avx2_impl.h"

namespace tern {
namespace {

using ternary_avx2::broadcast4;

// Decode (one token) is bound by vector ALU work on cores whose AVX2 units are the limit
// (Zen 3: all four vector pipes busy at ~7 weight bytes per cycle), so this path does less
// per tile: planes 1 and 3 are masked in place (no shift; 0x0C keeps 4 * (code + 1)), one
// shift by 4 serves planes 2 and 3, and the int16 sums stay in registers for 8 tiles
// before PMADDWD widens them. Two int16 accumulators per half: x1 (planes 0, 2; pairs at
// most 2 * 2 * 127) and x4 (planes 1, 3; four times that): 8 tiles put at most 8 * 2 *
// 2032 = 32512 in an x4 lane. The int32 sums are 4 * x1 + x4, divided by 4 exactly at the
// end: 31 vector instructions per tile instead of 36 (counted in the compiled loop).
//
// The weights are also prefetched 2 KB ahead (past the block's end into the next block,
// which is where the matrix continues; x86 prefetches never fault): on a Zen 3 VM the
// hardware prefetchers alone held one thread at ~10-12 GB/s, with this 12-14.5 GB/s
// (2 threads 17-19 -> 19-24 GB/s; tern-kernel-bench streamed GEMV).
void block_t2i16_avx2_1(const uint8_t* block, size_t cols, const int8_t* q, int32_t* out) {
  constexpr size_t kTilesPerWiden = 8;
  const __m256i m03 = _mm256_set1_epi8(0x03);
  const __m256i m0c = _mm256_set1_epi8(0x0C);
  const __m256i ones16 = _mm256_set1_epi16(1);
  const __m256i fours16 = _mm256_set1_epi16(4);
  __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  const size_t full = cols / kT2iBlockCols;
  const size_t k_tiles = (cols + kT2iBlockCols - 1) / kT2iBlockCols;
  int8_t tail[kT2iBlockCols];
  if (k_tiles != full) copy_tail<T2iTiles>(q, kT2iBlockCols, 1, cols, tail);
  for (size_t kt = 0; kt < k_tiles;) {
    const size_t stop = k_tiles - kt < kTilesPerWiden ? k_tiles : kt + kTilesPerWiden;
    __m256i x1[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    __m256i x4[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (; kt < stop; ++kt) {
      const int8_t* a = kt == full ? tail : q + kt * kT2iBlockCols;
      const __m256i a0 = broadcast4(a), a1 = broadcast4(a + 4), a2 = broadcast4(a + 8), a3 = broadcast4(a + 12);
      const uint8_t* w = block + kt * kT2iTileBytes;
      _mm_prefetch(reinterpret_cast<const char*>(w + ternary_avx2::kPrefetchBytes), _MM_HINT_T0);
      for (size_t h = 0; h < 2; ++h) {
        const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32 * h));
        const __m256i hi = _mm256_srli_epi16(lo, 4);
        x1[h] = _mm256_add_epi16(x1[h], _mm256_maddubs_epi16(_mm256_and_si256(lo, m03), a0));
        x4[h] = _mm256_add_epi16(x4[h], _mm256_maddubs_epi16(_mm256_and_si256(lo, m0c), a1));
        x1[h] = _mm256_add_epi16(x1[h], _mm256_maddubs_epi16(_mm256_and_si256(hi, m03), a2));
        x4[h] = _mm256_add_epi16(x4[h], _mm256_maddubs_epi16(_mm256_and_si256(hi, m0c), a3));
      }
    }
    for (size_t h = 0; h < 2; ++h) {
      const __m256i sum = _mm256_add_epi32(_mm256_madd_epi16(x1[h], fours16), _mm256_madd_epi16(x4[h], ones16));
      acc[h] = _mm256_add_epi32(acc[h], sum);
    }
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_srai_epi32(acc[0], 2));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8), _mm256_srai_epi32(acc[1], 2));
}

void block_t2i16_avx2(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, size_t tokens,
                      int32_t* out) {
  if (tokens == 1) return block_t2i16_avx2_1(block, cols, q, out);
  with_constant<size_t, 2, 3, 4, 5, 6, 7, ternary_avx2::kMaxTokens>(tokens, [&](auto nt) {
    ternary_avx2::block_n<ternary_avx2::T2iPlanes, decltype(nt)::value>(block, cols, q, q_stride, out);
  });
}

}  // namespace

const TernaryBlockKernelInfo ternary_block_t2i16__avx2 = {block_t2i16_avx2, ternary_avx2::kMaxTokens};

}  // namespace tern
