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
    const double amax = std::fabs(*std::max_element(x.begin(), x.end(), [](float a, float b) {
      return std::fabs(a) < std::fabs(b);
    }));
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

}  // namespace
}  // namespace tern
