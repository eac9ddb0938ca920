#include <gtest/gtest.h>

#include <cmath>
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
    double amax = 0;
    for (float v : x) amax = std::fmax(amax, std::fabs(static_cast<double>(v)));
    EXPECT_NEAR(scale, amax / 127.0, amax * 1e-7);
    int64_t expected_sum = 0;
    int hits_127 = 0;
    for (size_t i = 0; i < n; ++i) {
      const double exact = x[i] * 127.0 / amax;
      EXPECT_LE(std::fabs(q[i] - exact), 0.5 + 1e-4) << i;
      EXPECT_LE(std::abs(q[i]), 127);
      hits_127 += std::abs(q[i]) == 127;
      expected_sum += q[i];
    }
    EXPECT_EQ(sum, expected_sum);
    EXPECT_GE(hits_127, 1);
  }
}

}  // namespace
}  // namespace tern
