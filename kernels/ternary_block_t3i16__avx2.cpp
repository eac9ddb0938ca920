// Base-3 tile microkernel for AVX2 (ternary_base3.h), so x86 can run base-3 weights: a
// tile is two ymm halves (rows 0-7, 8-15). AVX2 has no byte multiply or byte shift, so
// p * 3 is two byte adds and digit floor(3p / 256) is (p >= 86) + (p >= 171) from two
// unsigned compares (max + cmpeq). Then as the t2i16 kernel: PMADDUBSW per plane, summed in
// int16 over up to 12 tiles (five planes of at most 2 * 2 * 128 each), PMADDWD to int32 rows
// (ternary_block_avx2_impl.h).
#include "kernels/ternary_block_avx2_impl.h"

namespace tern {
namespace {

void block_t3i16_avx2(const uint8_t* block, size_t cols, const int8_t* q, size_t q_stride, size_t tokens,
                      int32_t* out) {
  with_constant<size_t, 1, 2, 3, 4, 5, 6, 7, ternary_avx2::kMaxTokens>(tokens, [&](auto nt) {
    ternary_avx2::block_n<ternary_avx2::T3iPlanes, decltype(nt)::value>(block, cols, q, q_stride, out);
  });
}

}  // namespace

const TernaryBlockKernelInfo ternary_block_t3i16__avx2 = {block_t3i16_avx2, ternary_avx2::kMaxTokens};

}  // namespace tern
