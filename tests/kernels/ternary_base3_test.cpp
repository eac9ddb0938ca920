#include "kernels/ternary_base3.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <vector>

#include "kernels/isa.h"
#include "kernels/ternary_layout.h"
#include "kernels/ternary_ukernels.h"
#include "tests/support/test_util.h"

namespace tern {
namespace {

// The multiply-shift read of every digit of every encodable byte equals base-3 division.
TEST(TernaryBase3, DigitTrickDecodesEveryValue) {
  for (unsigned v = 0; v < 243; ++v) {
    const unsigned byte = (v * 256 + 242) / 243;  // ceil(v * 256 / 243)
    ASSERT_LT(byte, 256u);
    unsigned pow3 = 81;
    for (unsigned j = 0; j < kT3iDigits; ++j, pow3 /= 3) {
      EXPECT_EQ(t3i_digit(static_cast<uint8_t>(byte), j), v / pow3 % 3) << "v=" << v << " digit " << j;
    }
  }
}

TEST(TernaryBase3, PackedSizes) {
  EXPECT_EQ(t3i_packed_size(16, 20), 64u);
  EXPECT_EQ(t3i_packed_size(17, 20), 128u);
  EXPECT_EQ(t3i_packed_size(1, 21), 128u);
  // 2B-4T's FFN down projection: 1.6 bits per weight (6912 = 20 * 345 + 12, so one padded tile per row block).
  EXPECT_EQ(t3i_packed_size(2560, 6912), 2560u / 16u * 346u * 64u);
  EXPECT_EQ(t3i_packed_size(SIZE_MAX / 2, SIZE_MAX / 2), 0u);
}

// Positions by hand from the comment in ternary_base3.h.
TEST(TernaryBase3, HandFixture) {
  const size_t rows = 16, cols = 40;
  std::vector<int8_t> codes(rows * cols, 0);
  codes[5 * cols + 9] = 1;         // tile 0, byte 4*5 + 1 = 21, digit 2: v = 121 + 9 = 130
  codes[1 * cols + 20 + 16] = -1;  // tile 1, byte 64 + 4*1 + 0 = 68, digit 4: v = 121 - 1 = 120
  std::vector<uint8_t> packed(t3i_packed_size(rows, cols));
  ASSERT_EQ(packed.size(), 128u);
  ASSERT_EQ(t3i_pack(codes.data(), rows, cols, packed.data(), packed.size()), Error::Ok);
  for (size_t i = 0; i < packed.size(); ++i) {
    const unsigned v = i == 21 ? 130 : (i == 68 ? 120 : 121);
    EXPECT_EQ(packed[i], (v * 256 + 242) / 243) << "byte " << i;
  }
}

TEST(TernaryBase3, RoundTrips) {
  const std::pair<size_t, size_t> shapes[] = {{1, 1}, {1, 21}, {15, 19}, {16, 20}, {17, 41}, {33, 100}, {64, 2560}};
  for (auto [rows, cols] : shapes) {
    const auto codes = testing::random_ternary_codes(rows * cols, static_cast<uint32_t>(rows * 131 + cols));
    std::vector<uint8_t> packed(t3i_packed_size(rows, cols));
    ASSERT_EQ(t3i_pack(codes.data(), rows, cols, packed.data(), packed.size()), Error::Ok);
    std::vector<int8_t> back(rows * cols, 7);
    ASSERT_EQ(t3i_unpack(packed.data(), packed.size(), rows, cols, back.data()), Error::Ok);
    EXPECT_EQ(back, codes) << rows << "x" << cols;
  }
}

TEST(TernaryBase3, RejectsBadInput) {
  const int8_t bad[4] = {0, 1, 2, -1};
  uint8_t out[64];
  EXPECT_EQ(t3i_pack(bad, 1, 4, out, sizeof out), Error::InvalidArgument);
  EXPECT_EQ(t3i_pack(nullptr, 1, 4, out, sizeof out), Error::InvalidArgument);
  const int8_t ok[4] = {0, 1, 0, -1};
  EXPECT_EQ(t3i_pack(ok, 1, 4, out, 63), Error::InvalidArgument);
  ASSERT_EQ(t3i_pack(ok, 1, 4, out, sizeof out), Error::Ok);
  int8_t codes[4];
  EXPECT_EQ(t3i_unpack(out, 63, 1, 4, codes), Error::Truncated);
  out[2] = 255;  // v = 242 = 22222 in base 3: column 2 (digit 0) is +1
  ASSERT_EQ(t3i_unpack(out, 64, 1, 4, codes), Error::Ok);
  EXPECT_EQ(codes[2], 1);
  out[2] = 1;  // ceil(v * 256 / 243) skips 1 (v = 0 -> 0, v = 1 -> 2)
  EXPECT_EQ(t3i_unpack(out, 64, 1, 4, codes), Error::InvalidBundle);
}

// Every base-3 kernel, by ISA level; each must give the t2i16 scalar kernel's sums.
struct T3iKernelCase {
  Isa isa;
  const TernaryBlockKernelInfo* kernel;
};
const T3iKernelCase kT3iKernels[] = {
    {Isa::Scalar, &ternary_block_t3i16__scalar},
#if defined(__x86_64__)
    {Isa::Avx2, &ternary_block_t3i16__avx2},
#endif
#if defined(__aarch64__)
    {Isa::Neon, &ternary_block_t3i16__neon},
    {Isa::NeonDot, &ternary_block_t3i16__neondot},
#endif
};

// Each base-3 kernel gives the same int32 sums as the t2i16 scalar kernel (a separate
// implementation over a separate layout) on the same codes, across odd shapes and every
// token count; the exactness a base-3 bundle relies on. Scalar is also checked against
// the definition.
TEST(TernaryBase3, KernelsMatchT2i16Scalar) {
  const size_t col_cases[] = {1, 4, 15, 16, 19, 20, 21, 39, 40, 41, 100, 333, 2560};
  const TernaryBlockKernelInfo& k2 = ternary_block_t2i16__scalar;
  for (const T3iKernelCase& kc : kT3iKernels) {
    if (!isa_supported(kc.isa, cpu_features())) {
      std::printf("t3i16 %s: not supported here, skipped\n", to_string(kc.isa));
      continue;
    }
    const TernaryBlockKernelInfo& k3 = *kc.kernel;
    for (size_t cols : col_cases) {
      for (size_t tokens = 1; tokens <= k3.max_tokens; ++tokens) {
        const size_t rows = 16;
        const auto codes = testing::random_ternary_codes(rows * cols, static_cast<uint32_t>(cols * 7 + tokens));
        std::vector<uint8_t> p3(t3i_packed_size(rows, cols));
        std::vector<uint8_t> p2(ternary_packed_size(TernaryLayout::T2Interleaved16, rows, cols));
        ASSERT_EQ(t3i_pack(codes.data(), rows, cols, p3.data(), p3.size()), Error::Ok);
        ASSERT_EQ(ternary_pack(TernaryLayout::T2Interleaved16, codes.data(), rows, cols, p2.data(), p2.size()),
                  Error::Ok);
        // Activations only up to cols; the stride past them holds values no kernel may read.
        const size_t stride = cols + 5;
        std::mt19937 rng(static_cast<uint32_t>(cols + 1000 * tokens));
        std::uniform_int_distribution<int> dist(-128, 127);
        std::vector<int8_t> q(tokens * stride, 99);
        for (size_t t = 0; t < tokens; ++t)
          for (size_t c = 0; c < cols; ++c) q[t * stride + c] = static_cast<int8_t>(dist(rng));
        std::vector<int32_t> o3(tokens * 16, -1), o2(tokens * 16, -2);
        k3.fn(p3.data(), cols, q.data(), stride, tokens, o3.data());
        for (size_t t = 0; t < tokens; ++t)
          k2.fn(p2.data(), cols, q.data() + t * stride, stride, 1, o2.data() + t * 16);
        ASSERT_EQ(o3, o2) << to_string(kc.isa) << " cols " << cols << " tokens " << tokens;
        if (kc.isa != Isa::Scalar) continue;
        for (size_t t = 0; t < tokens; ++t) {
          for (size_t r = 0; r < rows; ++r) {
            int32_t want = 0;
            for (size_t c = 0; c < cols; ++c) want += (codes[r * cols + c] + 1) * q[t * stride + c];
            ASSERT_EQ(o3[t * 16 + r], want) << "cols " << cols << " token " << t << " row " << r;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tern
