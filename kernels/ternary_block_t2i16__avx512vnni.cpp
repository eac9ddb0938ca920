// T2Interleaved16 microkernel for AVX-512 VNNI: one 64-byte tile is one zmm; each
// 2-bit plane, masked out, is 16 rows x 4 columns of unsigned weights (code + 1) that
// VPDPBUSD multiplies by the 4 activation bytes of that plane broadcast to all lanes.
#include <immintrin.h>

#include "kernels/ternary_ukernels.h"

namespace tern {
namespace {

constexpr size_t kMaxTokens = 8;

inline __m512i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Decode keeps 4 accumulators per token (one per plane) to hide VPDPBUSD latency;
// wider token tiles have independent chains already and need the registers.
template <size_t NT>
void block_t2i16_avx512vnni_n(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, int32_t* out) {
  constexpr size_t kAcc = NT <= 2 ? 4 : 2;
  const __m512i mask = _mm512_set1_epi8(3);
  __m512i acc[NT][kAcc];
  for (size_t t = 0; t < NT; ++t)
    for (size_t a = 0; a < kAcc; ++a) acc[t][a] = _mm512_setzero_si512();

  auto tile = [&](const uint8_t* w, const int8_t* qp, size_t stride) {
    const __m512i packed = _mm512_loadu_si512(w);
    const __m512i w0 = _mm512_and_si512(packed, mask);
    const __m512i w1 = _mm512_and_si512(_mm512_srli_epi16(packed, 2), mask);
    const __m512i w2 = _mm512_and_si512(_mm512_srli_epi16(packed, 4), mask);
    const __m512i w3 = _mm512_and_si512(_mm512_srli_epi16(packed, 6), mask);
    for (size_t t = 0; t < NT; ++t) {
      const int8_t* a = qp + t * stride;
      acc[t][0] = _mm512_dpbusd_epi32(acc[t][0], w0, broadcast4(a));
      acc[t][1 % kAcc] = _mm512_dpbusd_epi32(acc[t][1 % kAcc], w1, broadcast4(a + 4));
      acc[t][2 % kAcc] = _mm512_dpbusd_epi32(acc[t][2 % kAcc], w2, broadcast4(a + 8));
      acc[t][3 % kAcc] = _mm512_dpbusd_epi32(acc[t][3 % kAcc], w3, broadcast4(a + 12));
    }
  };

  const size_t full = cols / kT2iBlockCols;
  for (size_t kt = 0; kt < full; ++kt) tile(block + kt * kT2iTileBytes, q + kt * kT2iBlockCols, q_stride);
  if (cols % kT2iBlockCols != 0) {
    int8_t tail[NT * kT2iBlockCols];
    t2i_copy_tail(q, q_stride, NT, cols, tail);
    tile(block + full * kT2iTileBytes, tail, kT2iBlockCols);
  }
  for (size_t t = 0; t < NT; ++t) {
    __m512i sum = acc[t][0];
    for (size_t a = 1; a < kAcc; ++a) sum = _mm512_add_epi32(sum, acc[t][a]);
    _mm512_storeu_si512(out + t * kT2iBlockRows, sum);
  }
}

void block_t2i16_avx512vnni(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, size_t tokens,
                            int32_t* out) {
  switch (tokens) {
    case 1: return block_t2i16_avx512vnni_n<1>(block, cols, q, q_stride, out);
    case 2: return block_t2i16_avx512vnni_n<2>(block, cols, q, q_stride, out);
    case 3: return block_t2i16_avx512vnni_n<3>(block, cols, q, q_stride, out);
    case 4: return block_t2i16_avx512vnni_n<4>(block, cols, q, q_stride, out);
    case 5: return block_t2i16_avx512vnni_n<5>(block, cols, q, q_stride, out);
    case 6: return block_t2i16_avx512vnni_n<6>(block, cols, q, q_stride, out);
    case 7: return block_t2i16_avx512vnni_n<7>(block, cols, q, q_stride, out);
    default: return block_t2i16_avx512vnni_n<8>(block, cols, q, q_stride, out);
  }
}

}  // namespace

const TernaryBlockKernelInfo ternary_block_t2i16__avx512vnni = {block_t2i16_avx512vnni, kMaxTokens};

}  // namespace tern
