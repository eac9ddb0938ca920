#include "runtime/engine/sampler_passes.h"

#include <algorithm>
#include <cmath>

#include "kernels/isa.h"

namespace tern::sampler_passes {

namespace {

inline F16 splat16(float x) {
  const F4 v = F4{} + x;
  return F16{{v, v, v, v}};
}

// Lane j + 8 onto j, then j + 4, + 2, + 1: a fixed order.
inline float sum16(const F16& x) {
  const F4 a = (x.v[0] + x.v[2]) + (x.v[1] + x.v[3]);
  return (a[0] + a[2]) + (a[1] + a[3]);
}

// One block of weights() (n <= kBlock). Written on plain floats, this loop vectorizes at
// every width (the exp has no compare GCC cannot convert); its lanes sum as sum16's.
__attribute__((always_inline)) inline float block_weights(const float* w, size_t n, float max, float inv_t, float* e) {
  float part[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) {
      const float v = weight_of((w[i + j] - max) * inv_t);
      e[i + j] = v;
      part[j] += v;
    }
  }
  for (size_t j = 0; i < n; ++i, ++j) {
    e[i] = weight_of((w[i] - max) * inv_t);
    part[j] += e[i];
  }
  F16 p;
  std::memcpy(&p, part, sizeof p);
  return sum16(p);
}

__attribute__((always_inline)) inline double weights_body(const float* w, size_t n, float max, float inv_t, float* e) {
  double total = 0.0;
  for (size_t b = 0; b < n; b += kBlock) total += block_weights(w + b, std::min(kBlock, n - b), max, inv_t, e + b);
  return total;
}

double weights_base(const float* w, size_t n, float max, float inv_t, float* e) {
  return weights_body(w, n, max, inv_t, e);
}

#if defined(__x86_64__)
#define TERN_SAMPLER_X86_LEVELS 1
__attribute__((target("avx2"))) double weights_avx2(const float* w, size_t n, float max, float inv_t, float* e) {
  return weights_body(w, n, max, inv_t, e);
}
__attribute__((target("avx512f"))) double weights_avx512(const float* w, size_t n, float max, float inv_t, float* e) {
  return weights_body(w, n, max, inv_t, e);
}
#endif

}  // namespace

float max_of(const float* x, size_t n) {
  F16 m = splat16(-INFINITY);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const F16 v = load16(x + i);
    for (int k = 0; k < 4; ++k) m.v[k] = v.v[k] > m.v[k] ? v.v[k] : m.v[k];
  }
  float best = -INFINITY;
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 4; ++j) best = m.v[k][j] > best ? m.v[k][j] : best;
  return best;
}

float max_finite(const float* x, size_t n) {
  const float best = max_of(x, n);
  if (best < INFINITY) return best;
  float finite = -INFINITY;
  for (size_t i = 0; i < n; ++i) finite = x[i] > finite && x[i] < INFINITY ? x[i] : finite;
  return finite;
}

int32_t argmax(const float* x, size_t n) {
  const float best = max_of(x, n);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const uint32_t mask = mask_above<true>(x + i, best);  // nothing is above it
    if (mask != 0) return static_cast<int32_t>(i + static_cast<size_t>(__builtin_ctz(mask)));
  }
  for (; i < n; ++i) {
    if (x[i] == best) return static_cast<int32_t>(i);
  }
  return 0;
}

uint8_t weights_level() {
  const IsaFlags isa = active_isa_flags();
  return (isa & kIsaAvx512) != 0 ? 2 : (isa & kIsaAvx2) != 0 ? 1 : 0;
}

double weights(uint8_t level, const float* w, size_t n, float max, float inv_t, float* e) {
#if defined(TERN_SAMPLER_X86_LEVELS)
  if (level == 2) return weights_avx512(w, n, max, inv_t, e);
  if (level == 1) return weights_avx2(w, n, max, inv_t, e);
#endif
  return weights_base(w, n, max, inv_t, e);
}

float block_sum(const float* e, size_t n) {
  float part[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) part[j] += e[i + j];
  for (size_t j = 0; i < n; ++i, ++j) part[j] += e[i];
  F16 p;
  std::memcpy(&p, part, sizeof p);
  return sum16(p);
}

void measure_levels(const float* e, size_t n, Level* levels, size_t n_levels) {
  float theta[kLevels];
  for (size_t l = 0; l < kLevels; ++l) theta[l] = l < n_levels ? levels[l].theta : INFINITY;
  double mass[kLevels] = {};
  size_t b = 0;
  for (; b + kBlock <= n; b += kBlock) {
    F16 part[kLevels] = {};
    for (size_t i = b; i < b + kBlock; i += kLanes) {
      const F16 v = load16(e + i);
      for (size_t l = 0; l < kLevels; ++l)
        for (int k = 0; k < 4; ++k) part[l].v[k] += v.v[k] >= theta[l] ? v.v[k] : F4{};
    }
    for (size_t l = 0; l < kLevels; ++l) mass[l] += sum16(part[l]);
  }
  for (; b < n; ++b)
    for (size_t l = 0; l < kLevels; ++l) mass[l] += e[b] >= theta[l] ? e[b] : 0.0f;
  for (size_t l = 0; l < n_levels && l < kLevels; ++l) levels[l].mass = mass[l];
}

}  // namespace tern::sampler_passes
