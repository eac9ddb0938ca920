#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/ternary_matmul.h"

namespace tern {
namespace {

TEST(QuantizeAbsmax, HandFixture) {
  // amax 4 -> 127/4 = 31.75 per unit; -63.5 rounds half to even (-64).
  const float x[4] = {1.0f, -2.0f, 0.5f, 4.0f};
  int8_t q[4];
  float scale = 0;
  int32_t sum = 0;
  quantize_row_absmax_int8(x, 4, q, &scale, &sum);
  EXPECT_EQ(q[0], 32);
  EXPECT_EQ(q[1], -64);
  EXPECT_EQ(q[2], 16);
  EXPECT_EQ(q[3], 127);
  EXPECT_EQ(sum, 32 - 64 + 16 + 127);
  EXPECT_FLOAT_EQ(scale, 4.0f / 127.0f);
}

TEST(QuantizeAbsmax, ZeroRow) {
  const float x[3] = {0.0f, -0.0f, 0.0f};
  int8_t q[3] = {1, 1, 1};
  float scale = 1;
  int32_t sum = 5;
  quantize_row_absmax_int8(x, 3, q, &scale, &sum);
  EXPECT_EQ(q[0] | q[1] | q[2], 0);
  EXPECT_EQ(scale, 0.0f);
  EXPECT_EQ(sum, 0);
}

// Against a double-precision computation: every q within half a step of x / scale.
TEST(QuantizeAbsmax, MatchesDoublePrecision) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (size_t n : {1u, 7u, 64u, 2560u}) {
    std::vector<float> x(n);
    for (auto& v : x) v = dist(rng);
    std::vector<int8_t> q(n);
    float scale = 0;
    int32_t sum = 0;
    quantize_row_absmax_int8(x.data(), n, q.data(), &scale, &sum);
    const double amax =
        std::fabs(*std::max_element(x.begin(), x.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); }));
    EXPECT_NEAR(scale, amax / 127.0, amax * 1e-7);
    for (size_t i = 0; i < n; ++i) {
      const double exact = x[i] * 127.0 / amax;
      EXPECT_LE(std::fabs(q[i] - exact), 0.5 + 1e-4) << i;
      EXPECT_LE(std::abs(q[i]), 127);
    }
    // Written as std algorithms: aarch64 GCC 12 ICEs vectorizing the fused loop.
    EXPECT_EQ(sum, std::accumulate(q.begin(), q.end(), 0));
    EXPECT_TRUE(std::any_of(q.begin(), q.end(), [](int8_t v) { return v == 127 || v == -127; }));
  }
}

const Isa kAllIsas[] = {Isa::Scalar, Isa::Avx2, Isa::Avx512Vnni, Isa::Neon, Isa::NeonDot, Isa::NeonI8mm};

// Every ISA's quantizer gives the scalar one's bytes, scale and sum, over lengths around
// the vector widths (8, 16, 32) and with exact ties (amax 127 makes 127 / amax = 1, so
// 2.5 -> 2, 3.5 -> 4, -2.5 -> -2).
TEST(QuantizeAbsmax, EveryIsaMatchesScalarBitForBit) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  for (Isa isa : kAllIsas) {
    if (!isa_supported(isa, cpu_features())) continue;
    for (size_t n : {0u, 1u, 7u, 8u, 15u, 16u, 17u, 31u, 32u, 33u, 100u, 2560u, 6912u}) {
      for (int ties = 0; ties < 2; ++ties) {
        std::vector<float> x(n);
        for (size_t i = 0; i < n; ++i) x[i] = ties ? static_cast<float>(static_cast<int>(i % 9) - 4) + 0.5f : dist(rng);
        if (ties && n > 0) x[n / 2] = -127.0f;
        std::vector<int8_t> expected(n + 1, 99), got(n + 1, 99);
        float expected_scale = -1, got_scale = -1;
        int32_t expected_sum = -1, got_sum = -1;
        ASSERT_EQ(
            quantize_row_absmax_int8_isa(Isa::Scalar, x.data(), n, expected.data(), &expected_scale, &expected_sum),
            Error::Ok);
        ASSERT_EQ(quantize_row_absmax_int8_isa(isa, x.data(), n, got.data(), &got_scale, &got_sum), Error::Ok);
        EXPECT_EQ(got, expected) << to_string(isa) << " n=" << n << " ties=" << ties;
        EXPECT_EQ(got_scale, expected_scale) << to_string(isa) << " n=" << n;
        EXPECT_EQ(got_sum, expected_sum) << to_string(isa) << " n=" << n;
        EXPECT_EQ(got[n], 99) << "wrote past n";
      }
    }
  }
}

TEST(QuantizeAbsmax, TiesRoundToEven) {
  const float x[6] = {127.0f, 2.5f, 3.5f, -2.5f, -0.5f, 0.5f};
  int8_t q[6];
  float scale;
  int32_t sum;
  quantize_row_absmax_int8(x, 6, q, &scale, &sum);
  const int8_t expected[6] = {127, 2, 4, -2, 0, 0};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(q[i], expected[i]) << i;
  EXPECT_EQ(sum, 131);
}

}  // namespace
}  // namespace tern
