// The sampler's passes over a whole vocabulary (128k floats): the maximum, the softmax's
// weights and their sum, the mass above thresholds, and masks of the values above one. Each
// keeps sixteen lanes in a fixed layout, so every sum is the same on every ISA; the weights,
// most of a softmax's time, also run in AVX2 and AVX-512 on x86.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "runtime/base/fast_exp.h"

namespace tern::sampler_passes {

inline constexpr size_t kLanes = 16;   // four 4-float vectors
inline constexpr size_t kBlock = 256;  // values summed in float lanes before the sum goes to double

// Sixteen floats as four 4-lane vectors (SSE2 and NEON registers; plain code elsewhere): four
// independent chains. Loops of plain floats with a compare inside (a maximum, a masked sum)
// do not vectorize as reliably.
typedef float F4 __attribute__((vector_size(16)));
typedef int32_t I4 __attribute__((vector_size(16)));
struct F16 {
  F4 v[4];
};
inline F16 load16(const float* p) {
  F16 r;
  std::memcpy(&r, p, sizeof r);
  return r;
}

// Bit j set for each of x[0, 16) that is > t (or >= t). Scans that keep few values walk the
// set bits of a mask per sixteen.
template <bool or_equal>
inline uint32_t mask_above(const float* x, float t) {
  const F16 v = load16(x);
  I4 bits = I4{};
  for (int k = 0; k < 4; ++k) {
    const I4 in = or_equal ? v.v[k] >= t : v.v[k] > t;
    bits |= in & (I4{1, 2, 4, 8} << (4 * k));
  }
  return static_cast<uint32_t>(bits[0] | bits[1] | bits[2] | bits[3]);
}

// Calls take(i + j) for each bit j of mask, lowest first.
template <typename Take>
inline void for_each_bit(uint32_t mask, size_t i, Take&& take) {
  for (; mask != 0; mask &= mask - 1) take(i + static_cast<size_t>(__builtin_ctz(mask)));
}

// e^x, and 0 below e^-87, for -inf and for NaN (exp_vectorizable clamps there instead).
inline float weight_of(float x) { return x >= -87.0f ? exp_vectorizable(x) : 0.0f; }

// The largest value of x[0, n), -inf when every one is -inf or NaN.
float max_of(const float* x, size_t n);
// The largest finite value (+inf passed over too).
float max_finite(const float* x, size_t n);
// The first index holding the largest value: the lowest id on ties (0 when all are NaN).
int32_t argmax(const float* x, size_t n);

// Which build of weights() runs: 0 SSE2, NEON or plain; 1 AVX2; 2 AVX-512. From
// active_isa_flags(), so TERN_ISA caps it as it caps the kernels.
uint8_t weights_level();
// e[i] = weight_of((w[i] - max) * inv_t) for i < n; returns their sum: float within a block
// of kBlock, double across blocks. Every level gives the same bits.
double weights(uint8_t level, const float* w, size_t n, float max, float inv_t, float* e);
// The sum weights() added for the block e[0, n) (n <= kBlock), bit for bit.
float block_sum(const float* e, size_t n);

// A threshold on the weights and the weight of the tokens at or above it.
struct Level {
  float x;      // ln of the threshold
  float theta;  // the threshold
  double mass;
};
inline constexpr size_t kLevels = 4;
// The mass of up to kLevels levels in one pass over e[0, n).
void measure_levels(const float* e, size_t n, Level* levels, size_t n_levels);

}  // namespace tern::sampler_passes
