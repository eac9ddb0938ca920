// T2Interleaved16 microkernel for AVX-512 VNNI: one 64-byte tile is one zmm; each
// 2-bit plane, masked out, is 16 rows x 4 columns of unsigned weights (code + 1) that
// VPDPBUSD multiplies by the 4 activation bytes of that plane broadcast to all lanes.
// Batches of tokens go two row blocks at a time (two_blocks_n), so each broadcast feeds two
// VPDPBUSD: with one block per broadcast the loop ran at ~80 % of the VPDPBUSD rate (two per
// cycle on Zen 5), with two at ~97 % (kernel A/B on the Zen 5 VM, hot weights).
#include <immintrin.h>

#include "kernels/ternary_ukernels.h"

namespace tern {
namespace {

constexpr size_t kMaxTokens = 16;

inline __m512i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// The four 2-bit planes of one tile as unsigned bytes code + 1. In place (kInPlace), plane j
// is only masked and stays 4^j times its value, which the caller's per-plane accumulators
// undo with one shift each at the end; otherwise each plane is shifted down.
template <bool kInPlace>
inline void decode_planes(__m512i packed, __m512i w[4]) {
  const __m512i mask = _mm512_set1_epi8(3);
  if (kInPlace) {
    w[0] = _mm512_and_si512(packed, mask);
    w[1] = _mm512_and_si512(packed, _mm512_set1_epi8(0x0c));
    w[2] = _mm512_and_si512(packed, _mm512_set1_epi8(0x30));
    w[3] = _mm512_and_si512(packed, _mm512_set1_epi8(static_cast<char>(0xc0)));
  } else {
    w[0] = _mm512_and_si512(packed, mask);
    w[1] = _mm512_and_si512(_mm512_srli_epi16(packed, 2), mask);
    w[2] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), mask);
    w[3] = _mm512_and_si512(_mm512_srli_epi16(packed, 6), mask);
  }
}

// Decode keeps 4 accumulators per token (one per plane) to hide VPDPBUSD latency;
// wider token tiles have independent chains already and need the registers (16 tokens
// x 1 accumulator + 4 planes fit the 32 zmm registers).
template <size_t NT>
__attribute__((noinline)) void block_t2i16_avx512vnni_n(const uint8_t* block, size_t cols, const int8_t* q,
                                                        size_t q_stride, int32_t* out) {
  constexpr size_t kAcc = NT <= 2 ? 4 : (NT <= 8 ? 2 : 1);
  // With one accumulator per plane, plane j can stay where it is (masked, not shifted): its
  // sums come out 4^j times too large, exactly, and one shift per accumulator at the end
  // undoes that. Three fewer instructions per tile, which is what decode is bound by when
  // the weights come from cache (|lane| <= 4 * 192 * 128 per tile: int32 holds K < 350k).
  constexpr bool kInPlace = kAcc == 4;
  __m512i acc[NT][kAcc];
  for (size_t t = 0; t < NT; ++t)
    for (size_t a = 0; a < kAcc; ++a) acc[t][a] = _mm512_setzero_si512();

  // One loop over every tile, the last one reading zero-padded activations when K is
  // not a multiple of 16: a single copy of the body keeps the accumulators in registers.
  const size_t full = cols / kT2iBlockCols;
  const size_t k_tiles = (cols + kT2iBlockCols - 1) / kT2iBlockCols;
  int8_t tail[NT * kT2iBlockCols];
  if (k_tiles != full) copy_tail<T2iTiles>(q, q_stride, NT, cols, tail);
  for (size_t kt = 0; kt < k_tiles; ++kt) {
    const bool padded = kt == full;
    const int8_t* qp = padded ? tail : q + kt * kT2iBlockCols;
    const size_t stride = padded ? kT2iBlockCols : q_stride;
    __m512i w[4];
    decode_planes<kInPlace>(_mm512_loadu_si512(block + kt * kT2iTileBytes), w);
    for (size_t t = 0; t < NT; ++t) {
      const int8_t* a = qp + t * stride;
      acc[t][0] = _mm512_dpbusd_epi32(acc[t][0], w[0], broadcast4(a));
      acc[t][1 % kAcc] = _mm512_dpbusd_epi32(acc[t][1 % kAcc], w[1], broadcast4(a + 4));
      acc[t][2 % kAcc] = _mm512_dpbusd_epi32(acc[t][2 % kAcc], w[2], broadcast4(a + 8));
      acc[t][3 % kAcc] = _mm512_dpbusd_epi32(acc[t][3 % kAcc], w[3], broadcast4(a + 12));
    }
  }
  for (size_t t = 0; t < NT; ++t) {
    __m512i sum = acc[t][0];
    for (size_t a = 1; a < kAcc; ++a)
      sum = _mm512_add_epi32(sum, kInPlace ? _mm512_srai_epi32(acc[t][a], static_cast<unsigned>(2 * a)) : acc[t][a]);
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
    case 8: return block_t2i16_avx512vnni_n<8>(block, cols, q, q_stride, out);
    case 9: return block_t2i16_avx512vnni_n<9>(block, cols, q, q_stride, out);
    case 10: return block_t2i16_avx512vnni_n<10>(block, cols, q, q_stride, out);
    case 11: return block_t2i16_avx512vnni_n<11>(block, cols, q, q_stride, out);
    case 12: return block_t2i16_avx512vnni_n<12>(block, cols, q, q_stride, out);
    case 13: return block_t2i16_avx512vnni_n<13>(block, cols, q, q_stride, out);
    case 14: return block_t2i16_avx512vnni_n<14>(block, cols, q, q_stride, out);
    case 15: return block_t2i16_avx512vnni_n<15>(block, cols, q, q_stride, out);
    default: return block_t2i16_avx512vnni_n<16>(block, cols, q, q_stride, out);
  }
}

// With a few tokens the two-block loop is bound by VPDPBUSD and its two weight streams stall
// it: prefetching 32 tiles ahead on each made 5-token passes over 2B-4T matrices streamed from
// DRAM 1.3-1.4x faster (tern-kernel-bench tokens:5 streamed:1, Zen 5 VM). Past a block's end
// it prefetches the next one's tiles, which the following call reads. One token (decode) has
// no prefetch: it did not help there.
constexpr size_t kTwoBlocksPrefetchBytes = 2048;
// And each stream's tile as far as 8 blocks ahead into L2 (4 calls ahead): a pass verifying 4
// drafts of 2B-4T at 1 thread took 45.5-46.5 ms instead of 49.7-50.3 (tern-bench --verify 4,
// three interleaved runs on the Zen 5 VM); 2 or 4 blocks ahead gained less, and prefill from
// cache is unchanged (tern-kernel-bench tokens:128).
constexpr size_t kTwoBlocksL2PrefetchBlocks = 8;

// Two consecutive 16-row blocks x NT tokens: the planes of both blocks' tiles, then per plane
// and token one broadcast for two VPDPBUSD. Accumulators per (block, token) as in the single
// block: four (planes masked in place) for one token, two up to four, one beyond
// (2 x NT chains are enough to hide the VPDPBUSD latency); 2 * NT * kAcc + 8 planes + the
// broadcast and masks fit the 32 zmm registers up to NT = 11.
template <size_t NT>
__attribute__((noinline)) void two_blocks_avx512vnni_n(const uint8_t* block, size_t cols, const int8_t* q,
                                                       size_t q_stride, int32_t* out) {
  constexpr size_t kAcc = NT == 1 ? 4 : (NT <= 4 ? 2 : 1);
  constexpr bool kInPlace = kAcc == 4;
  const size_t k_tiles = (cols + kT2iBlockCols - 1) / kT2iBlockCols;
  const uint8_t* blocks[2] = {block, block + k_tiles * kT2iTileBytes};
  __m512i acc[2][NT][kAcc];
  for (size_t b = 0; b < 2; ++b)
    for (size_t t = 0; t < NT; ++t)
      for (size_t a = 0; a < kAcc; ++a) acc[b][t][a] = _mm512_setzero_si512();
  auto tile = [&](size_t kt, const int8_t* qp, size_t stride) __attribute__((always_inline)) {
    __m512i w[2][4];
    for (size_t b = 0; b < 2; ++b) {
      _mm_prefetch(reinterpret_cast<const char*>(blocks[b] + kt * kT2iTileBytes + kTwoBlocksPrefetchBytes),
                   _MM_HINT_T0);
      _mm_prefetch(
          reinterpret_cast<const char*>(blocks[b] + (kt + kTwoBlocksL2PrefetchBlocks * k_tiles) * kT2iTileBytes),
          _MM_HINT_T2);
      decode_planes<kInPlace>(_mm512_loadu_si512(blocks[b] + kt * kT2iTileBytes), w[b]);
    }
    for (size_t j = 0; j < 4; ++j)
      for (size_t t = 0; t < NT; ++t) {
        const __m512i x = broadcast4(qp + t * stride + 4 * j);
        for (size_t b = 0; b < 2; ++b) acc[b][t][j % kAcc] = _mm512_dpbusd_epi32(acc[b][t][j % kAcc], w[b][j], x);
      }
  };
  const size_t full = cols / kT2iBlockCols;
  for (size_t kt = 0; kt < full; ++kt) tile(kt, q + kt * kT2iBlockCols, q_stride);
  if (full != k_tiles) {  // the last, partial tile reads zero-padded activations
    int8_t tail[NT * kT2iBlockCols];
    copy_tail<T2iTiles>(q, q_stride, NT, cols, tail);
    tile(full, tail, kT2iBlockCols);
  }
  for (size_t b = 0; b < 2; ++b)
    for (size_t t = 0; t < NT; ++t) {
      __m512i sum = acc[b][t][0];
      for (size_t a = 1; a < kAcc; ++a)
        sum = _mm512_add_epi32(sum,
                               kInPlace ? _mm512_srai_epi32(acc[b][t][a], static_cast<unsigned>(2 * a)) : acc[b][t][a]);
      _mm512_storeu_si512(out + (b * NT + t) * kT2iBlockRows, sum);
    }
}

constexpr size_t kTwoBlocksMaxTokens = 8;

void two_blocks_t2i16_avx512vnni(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, size_t tokens,
                                 int32_t* out) {
  with_constant<size_t, 1, 2, 3, 4, 5, 6, 7, kTwoBlocksMaxTokens>(
      tokens, [&](auto nt) { two_blocks_avx512vnni_n<decltype(nt)::value>(block, cols, q, q_stride, out); });
}

}  // namespace

const TernaryBlockKernelInfo ternary_block_t2i16__avx512vnni = {block_t2i16_avx512vnni, kMaxTokens,
                                                                two_blocks_t2i16_avx512vnni, kTwoBlocksMaxTokens};

}  // namespace tern
