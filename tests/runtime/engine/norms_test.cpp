// The forward pass's norms against their formulas in double.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/engine/forward.h"

namespace tern {
namespace {

TEST(Norms, RmsNormAndTheBitllamaNormMatchTheirFormulas) {
  const size_t n = 48;
  std::vector<float> x(n), w(n), out(n);
  double sq = 0.0;
  for (size_t i = 0; i < n; ++i) {
    x[i] = std::cos(0.3f * i) * 3.0f;
    w[i] = 0.5f + i / 100.0f;
    sq += static_cast<double>(x[i]) * x[i];
  }
  rms_norm(x.data(), w.data(), n, 1e-5f, out.data());
  const double inv = 1.0 / std::sqrt(sq / n + 1e-5);
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(out[i], x[i] * inv * w[i], 1e-5);
  bitllama_norm(x.data(), n, out.data());
  const double denom = std::sqrt(sq / n) * n;
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(out[i], x[i] / denom, 1e-7);
  std::vector<float> zeros(n, 0.0f);
  bitllama_norm(zeros.data(), n, out.data());
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace tern
