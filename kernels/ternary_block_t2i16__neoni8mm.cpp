// T2Interleaved16 prefill microkernel for Armv8.6 i8mm: SMMLA multiplies a 2x8 block of
// weights by a 2x8 block of activations (two tokens) into a 2x2 int32 tile, 32 MACs per
// instruction against SDOT's 16. The layout's planes are regrouped in registers:
//   ZIP1.4S(plane 0, plane 1) = rows 0,1 x columns 0..7    ZIP2.4S -> rows 2,3
//   ZIP1.4S(plane 2, plane 3) = rows 0,1 x columns 8..15   ZIP2.4S -> rows 2,3
//   ZIP1.2D(token a, token b) = tokens a,b x columns 0..7  ZIP2.2D -> columns 8..15
// A single token (decode) gains nothing from SMMLA and goes to the SDOT kernel.
#include "kernels/ternary_block_neon_impl.h"

namespace tern {
namespace {

constexpr size_t kMaxTokens = 4;

template <size_t NP>  // token pairs
void block_t2i16_i8mm_pairs(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, int32_t* out) {
  int32x4_t acc[NP][4][2];  // [pair][row quad][rows 0,1 | rows 2,3], each [r t0, r t1, r' t0, r' t1]
  for (size_t p = 0; p < NP; ++p)
    for (size_t m = 0; m < 4; ++m) acc[p][m][0] = acc[p][m][1] = vdupq_n_s32(0);

  for_each_tile<T2iTiles, 2 * NP>(block, cols, q, q_stride, [&](const uint8_t* w, const int8_t* qp, size_t stride) {
    int8x16_t b_lo[NP], b_hi[NP];
    for (size_t p = 0; p < NP; ++p) {
      const int64x2_t a0 = vreinterpretq_s64_s8(vld1q_s8(qp + 2 * p * stride));
      const int64x2_t a1 = vreinterpretq_s64_s8(vld1q_s8(qp + (2 * p + 1) * stride));
      b_lo[p] = vreinterpretq_s8_s64(vzip1q_s64(a0, a1));
      b_hi[p] = vreinterpretq_s8_s64(vzip2q_s64(a0, a1));
    }
#pragma GCC unroll 4
    for (size_t m = 0; m < 4; ++m) {
      int8x16_t wp[4];
      ternary_neon::T2iPlanes::decode(vld1q_u8(w + 16 * m), wp);
      const int32x4_t w0 = vreinterpretq_s32_s8(wp[0]), w1 = vreinterpretq_s32_s8(wp[1]);
      const int32x4_t w2 = vreinterpretq_s32_s8(wp[2]), w3 = vreinterpretq_s32_s8(wp[3]);
      const int8x16_t lo_rows01 = vreinterpretq_s8_s32(vzip1q_s32(w0, w1));
      const int8x16_t lo_rows23 = vreinterpretq_s8_s32(vzip2q_s32(w0, w1));
      const int8x16_t hi_rows01 = vreinterpretq_s8_s32(vzip1q_s32(w2, w3));
      const int8x16_t hi_rows23 = vreinterpretq_s8_s32(vzip2q_s32(w2, w3));
      for (size_t p = 0; p < NP; ++p) {
        acc[p][m][0] = vmmlaq_s32(acc[p][m][0], lo_rows01, b_lo[p]);
        acc[p][m][0] = vmmlaq_s32(acc[p][m][0], hi_rows01, b_hi[p]);
        acc[p][m][1] = vmmlaq_s32(acc[p][m][1], lo_rows23, b_lo[p]);
        acc[p][m][1] = vmmlaq_s32(acc[p][m][1], hi_rows23, b_hi[p]);
      }
    }
  });
  for (size_t p = 0; p < NP; ++p)
    for (size_t m = 0; m < 4; ++m) {
      vst1q_s32(out + (2 * p) * kT2iBlockRows + 4 * m, vuzp1q_s32(acc[p][m][0], acc[p][m][1]));
      vst1q_s32(out + (2 * p + 1) * kT2iBlockRows + 4 * m, vuzp2q_s32(acc[p][m][0], acc[p][m][1]));
    }
}

void block_t2i16_i8mm(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, size_t tokens,
                      int32_t* out) {
  const TernaryBlockKernel sdot = ternary_block_t2i16__neondot.fn;
  switch (tokens) {
    case 1: return sdot(block, cols, q, q_stride, 1, out);
    case 2: return block_t2i16_i8mm_pairs<1>(block, cols, q, q_stride, out);
    case 3:
      block_t2i16_i8mm_pairs<1>(block, cols, q, q_stride, out);
      return sdot(block, cols, q + 2 * q_stride, q_stride, 1, out + 2 * kT2iBlockRows);
    default: return block_t2i16_i8mm_pairs<2>(block, cols, q, q_stride, out);
  }
}

}  // namespace

const TernaryBlockKernelInfo ternary_block_t2i16__neoni8mm = {block_t2i16_i8mm, kMaxTokens};

}  // namespace tern
