// Eight f32 lanes (ymm): the vector traits the shared attention and KV loops
// (kv_*_impl.h, dense_attention_impl.h) are instantiated with. Include only from files built
// with AVX2, FMA and F16C (the avx2 and avx512 files). Internal linkage: each file compiles
// its own copy with its own ISA flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/half.h"

namespace tern {
namespace {

struct F32x8 {
  using Vec = __m256;
  static constexpr uint32_t kWidth = 8;
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec set1(float v) { return _mm256_set1_ps(v); }
  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static Vec load(const uint16_t* halves) { return load_f16x8(halves); }
  static void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  static float half(uint16_t h) { return _cvtsh_ss(h); }
  static Vec fma(Vec a, Vec b, Vec acc) { return _mm256_fmadd_ps(a, b, acc); }
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec min(Vec a, Vec b) { return _mm256_min_ps(a, b); }
  static Vec max(Vec a, Vec b) { return _mm256_max_ps(a, b); }
  static float hsum(Vec v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  // Lane order, like a scalar loop over the lanes (the result is the same in any order).
  static float reduce_min(Vec v) {
    alignas(32) float a[8];
    _mm256_store_ps(a, v);
    float l = a[0];
    for (int k = 1; k < 8; ++k) l = a[k] < l ? a[k] : l;
    return l;
  }
  static float reduce_max(Vec v) {
    alignas(32) float a[8];
    _mm256_store_ps(a, v);
    float h = a[0];
    for (int k = 1; k < 8; ++k) h = a[k] > h ? a[k] : h;
    return h;
  }
};

}  // namespace
}  // namespace tern
