// Base-3 tile microkernel for AVX2 (ternary_base3.h), so x86 can run base-3 weights: a
// tile is two ymm halves (rows 0-7, 8-15). AVX2 has no byte multiply or byte shift, so
// p * 3 is two byte adds and digit floor(3p / 256) is (p >= 86) + (p >= 171) from two
// unsigned compares (max + cmpeq). Then as the t2i16 kernel: PMADDUBSW per plane, five
// planes summed in int16 (at most 5 * 2 * 2 * 128), PMADDWD to int32 rows.
#include <immintrin.h>

#include "kernels/ternary_base3.h"
#include "kernels/ternary_ukernels.h"

namespace tern {
namespace {

constexpr size_t kMaxTokens = 4;

inline __m256i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

inline __m256i at_least(__m256i p, __m256i k) { return _mm256_cmpeq_epi8(_mm256_max_epu8(p, k), p); }

template <size_t NT>
void block_t3i16_avx2_n(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, int32_t* out) {
  const __m256i k86 = _mm256_set1_epi8(86);
  const __m256i k171 = _mm256_set1_epi8(static_cast<char>(171));
  const __m256i zero = _mm256_setzero_si256();
  const __m256i ones16 = _mm256_set1_epi16(1);
  __m256i acc[NT][2];
  for (size_t t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_si256();

  auto tile = [&](const uint8_t* w, const int8_t* qp, size_t stride) {
    for (size_t h = 0; h < 2; ++h) {
      __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32 * h));
      __m256i wd[kT3iDigits];
      for (size_t j = 0; j < kT3iDigits; ++j) {
        if (j > 0) p = _mm256_add_epi8(p, _mm256_add_epi8(p, p));
        wd[j] = _mm256_sub_epi8(zero, _mm256_add_epi8(at_least(p, k86), at_least(p, k171)));
      }
      for (size_t t = 0; t < NT; ++t) {
        const int8_t* a = qp + t * stride;
        __m256i s = _mm256_maddubs_epi16(wd[0], broadcast4(a));
        for (size_t j = 1; j < kT3iDigits; ++j) s = _mm256_add_epi16(s, _mm256_maddubs_epi16(wd[j], broadcast4(a + 4 * j)));
        acc[t][h] = _mm256_add_epi32(acc[t][h], _mm256_madd_epi16(s, ones16));
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
  for (size_t t = 0; t < NT; ++t) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + t * kT3iBlockRows), acc[t][0]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + t * kT3iBlockRows + 8), acc[t][1]);
  }
}

void block_t3i16_avx2(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, size_t tokens,
                      int32_t* out) {
  switch (tokens) {
    case 1: return block_t3i16_avx2_n<1>(block, cols, q, q_stride, out);
    case 2: return block_t3i16_avx2_n<2>(block, cols, q, q_stride, out);
    case 3: return block_t3i16_avx2_n<3>(block, cols, q, q_stride, out);
    default: return block_t3i16_avx2_n<4>(block, cols, q, q_stride, out);
  }
}

}  // namespace

const TernaryBlockKernelInfo ternary_block_t3i16__avx2 = {block_t3i16_avx2, kMaxTokens};

}  // namespace tern
