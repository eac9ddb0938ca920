// RoPE's two pairings against complex rotations computed in double.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <vector>

#include "runtime/base/rope.h"

namespace tern {
namespace {

TEST(Rope, RotateHalfAndAdjacentPairsAreComplexRotations) {
  const size_t hd = 16, half = hd / 2;
  const float theta = 10000.0f;
  std::vector<float> inv(half), cs(half), sn(half);
  for (size_t i = 0; i < half; ++i) inv[i] = 1.0f / std::pow(theta, 2.0f * i / hd);
  const uint32_t pos = 37;
  rope_angles(inv.data(), half, pos, cs.data(), sn.data());
  std::vector<float> x(hd);
  for (size_t i = 0; i < hd; ++i) x[i] = std::sin(1.0f + i);
  std::vector<float> a = x, b = x;
  rope_rotate_half(a.data(), hd, cs.data(), sn.data());
  rope_adjacent_pairs(b.data(), hd, cs.data(), sn.data());
  for (size_t i = 0; i < half; ++i) {
    const double angle = pos * std::pow(static_cast<double>(theta), -2.0 * i / hd);
    const std::complex<double> r = std::polar(1.0, angle);
    const std::complex<double> half_pair = std::complex<double>(x[i], x[i + half]) * r;
    EXPECT_NEAR(a[i], half_pair.real(), 1e-4);
    EXPECT_NEAR(a[i + half], half_pair.imag(), 1e-4);
    const std::complex<double> adjacent = std::complex<double>(x[2 * i], x[2 * i + 1]) * r;
    EXPECT_NEAR(b[2 * i], adjacent.real(), 1e-4);
    EXPECT_NEAR(b[2 * i + 1], adjacent.imag(), 1e-4);
  }
}

}  // namespace
}  // namespace tern
