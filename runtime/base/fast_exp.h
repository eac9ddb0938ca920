// e^x to about 2 ulp in plain float arithmetic, so that loops over it vectorize (libm's expf
// is a call per element: the embedding families' GELU and SiLU spent half a forward pass in
// it, the sampler's softmax over 128k logits most of its time). Cody-Waite reduction by ln 2,
// a degree-6 polynomial, 2^n from the exponent bits; the same operations in the same order on
// every ISA. x is clamped to [-87, 88]: e^-inf gives about 1.6e-38, not 0.
#pragma once

#include <cstdint>
#include <cstring>

namespace tern {

inline float exp_vectorizable(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float shifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (x * 1.44269504088896341f + shifter) - shifter;
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * (r * r) + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}

}  // namespace tern
