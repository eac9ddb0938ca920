// Sixteen f32 lanes (zmm): the vector traits the shared attention and KV loops
// (kv_*_impl.h, dense_attention_impl.h) are instantiated with. Include only from files built
// with the avx512 flags. Internal linkage: each file compiles its own copy with its own ISA
// flags.
#pragma once

// GCC 12 reports its own _mm512_undefined_* helpers as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

#include "kernels/half.h"

namespace tern {
namespace {

struct F32x16 {
  using Vec = __m512;
  static constexpr uint32_t kWidth = 16;
  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec set1(float v) { return _mm512_set1_ps(v); }
  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static Vec load(const uint16_t* halves) { return load_f16x16(halves); }
  static void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
  static float half(uint16_t h) { return _cvtsh_ss(h); }
  static Vec fma(Vec a, Vec b, Vec acc) { return _mm512_fmadd_ps(a, b, acc); }
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec min(Vec a, Vec b) { return _mm512_min_ps(a, b); }
  static Vec max(Vec a, Vec b) { return _mm512_max_ps(a, b); }
  static float hsum(Vec v) { return _mm512_reduce_add_ps(v); }
  static float reduce_min(Vec v) { return _mm512_reduce_min_ps(v); }
  static float reduce_max(Vec v) { return _mm512_reduce_max_ps(v); }
};

}  // namespace
}  // namespace tern
