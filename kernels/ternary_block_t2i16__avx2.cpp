// T2Interleaved16 microkernel for AVX2: a 64-byte tile is two ymm halves (rows 0-7,
// rows 8-15). PMADDUBSW multiplies the unsigned weights (code + 1) by the broadcast
// activation bytes into int16 pairs (at most 2 * 2 * 127, no saturation); the four
// planes are summed in int16 (at most 2032) before one PMADDWD widens to int32 rows.
#include <immintrin.h>

#include "kernels/ternary_ukernels.h"

namespace tern {
namespace {

constexpr size_t kMaxTokens = 4;

inline __m256i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

template <size_t NT>
void block_t2i16_avx2_n(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, int32_t* out) {
  const __m256i mask = _mm256_set1_epi8(3);
  const __m256i ones16 = _mm256_set1_epi16(1);
  __m256i acc[NT][2];
  for (size_t t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_si256();

  auto tile = [&](const uint8_t* w, const int8_t* qp, size_t stride) {
    for (size_t h = 0; h < 2; ++h) {
      const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32 * h));
      const __m256i w0 = _mm256_and_si256(packed, mask);
      const __m256i w1 = _mm256_and_si256(_mm256_srli_epi16(packed, 2), mask);
      const __m256i w2 = _mm256_and_si256(_mm256_srli_epi16(packed, 4), mask);
      const __m256i w3 = _mm256_and_si256(_mm256_srli_epi16(packed, 6), mask);
      for (size_t t = 0; t < NT; ++t) {
        const int8_t* a = qp + t * stride;
        __m256i s = _mm256_maddubs_epi16(w0, broadcast4(a));
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w1, broadcast4(a + 4)));
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w2, broadcast4(a + 8)));
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w3, broadcast4(a + 12)));
        acc[t][h] = _mm256_add_epi32(acc[t][h], _mm256_madd_epi16(s, ones16));
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
  for (size_t t = 0; t < NT; ++t) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + t * kT2iBlockRows), acc[t][0]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + t * kT2iBlockRows + 8), acc[t][1]);
  }
}

void block_t2i16_avx2(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, size_t tokens,
                      int32_t* out) {
  switch (tokens) {
    case 1: return block_t2i16_avx2_n<1>(block, cols, q, q_stride, out);
    case 2: return block_t2i16_avx2_n<2>(block, cols, q, q_stride, out);
    case 3: return block_t2i16_avx2_n<3>(block, cols, q, q_stride, out);
    default: return block_t2i16_avx2_n<4>(block, cols, q, q_stride, out);
  }
}

}  // namespace

const TernaryBlockKernelInfo ternary_block_t2i16__avx2 = {block_t2i16_avx2, kMaxTokens};

}  // namespace tern
