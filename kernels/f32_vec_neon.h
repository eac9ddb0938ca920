// Four f32 lanes (q register): the vector traits the shared attention and KV loops
// (kv_*_impl.h, dense_attention_impl.h) are instantiated with (aarch64 baseline Advanced
// SIMD). Internal linkage: each file compiles its own copy with its own ISA flags.
#pragma once

#include <arm_neon.h>

#include <cstdint>

#include "kernels/half.h"

namespace tern {
namespace {

struct F32x4 {
  using Vec = float32x4_t;
  static constexpr uint32_t kWidth = 4;
  static Vec zero() { return vdupq_n_f32(0.0f); }
  static Vec set1(float v) { return vdupq_n_f32(v); }
  static Vec load(const float* p) { return vld1q_f32(p); }
  static Vec load(const uint16_t* halves) { return load_f16x4(halves); }
  static void store(float* p, Vec v) { vst1q_f32(p, v); }
  static float half(uint16_t h) { return f16_to_f32(h); }
  static Vec fma(Vec a, Vec b, Vec acc) { return vfmaq_f32(acc, a, b); }
  static Vec add(Vec a, Vec b) { return vaddq_f32(a, b); }
  static Vec mul(Vec a, Vec b) { return vmulq_f32(a, b); }
  static Vec min(Vec a, Vec b) { return vminq_f32(a, b); }
  static Vec max(Vec a, Vec b) { return vmaxq_f32(a, b); }
  static float hsum(Vec v) { return vaddvq_f32(v); }
  static float reduce_min(Vec v) { return vminvq_f32(v); }
  static float reduce_max(Vec v) { return vmaxvq_f32(v); }
};

}  // namespace
}  // namespace tern
