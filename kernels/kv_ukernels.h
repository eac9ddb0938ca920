// Per-ISA entry points behind kv_quant.h / kv_attention.h (internal to kernels/).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/half.h"
#include "kernels/kv_quant.h"

namespace tern {

// Quantization (kv_quant__<isa>.cpp).
struct KvQuantUkernels {
  // Per-channel range over a key block's tokens.
  void (*key_block_minmax)(const float* keys, uint32_t tokens, uint32_t head_dim, float* lo, float* hi);
  // Range of n floats.
  void (*range)(const float* x, uint32_t n, float* lo, float* hi);
  // codes[i] = clamp(round_even((x[i] - min[i]) * inv[i]), 0, levels) for n elements.
  void (*codes)(const float* x, const float* min, const float* inv, uint32_t n, uint32_t levels, uint8_t* codes);
  // out[i] = f32_to_f16(x[i]) (half.h) for n elements: the f16 caches' rows.
  void (*float_halves)(const float* x, uint32_t n, uint16_t* out);
};

// Attention reads (kv_attention__<isa>.cpp).
struct KvAttentionUkernels {
  // For each query i < queries (1..kKvMaxQueries, rows of qs head_dim apart):
  // scores[i*stride + t] = scale * (bias[i] + Σ_c qs[i][c] * code[t][c]); rows stride row_bytes.
  // Each chunk of codes is unpacked once for all queries (GQA: the query heads of a group).
  void (*code_row_dots)(const float* qs, const float* bias, uint32_t queries, const uint8_t* rows, size_t row_bytes,
                        uint32_t tokens, uint32_t head_dim, uint32_t bits, float scale, float* scores, size_t stride);
  // out[i][c] += Σ_t p[i*p_stride + t] * (min_g + step_g * code[t][c]) over value rows.
  void (*value_rows_accumulate)(const float* p, size_t p_stride, uint32_t queries, const uint8_t* rows, uint32_t tokens,
                                uint32_t head_dim, uint32_t group, uint32_t bits, float* out);
  void (*exact_scores_f32)(const float* q, const float* keys, uint32_t tokens, uint32_t head_dim, float scale,
                           float* scores);
  void (*exact_scores_f16)(const float* q, const uint16_t* keys, uint32_t tokens, uint32_t head_dim, float scale,
                           float* scores);
  void (*exact_accumulate_f32)(const float* p, const float* values, uint32_t tokens, uint32_t head_dim, float* out);
  void (*exact_accumulate_f16)(const float* p, const uint16_t* values, uint32_t tokens, uint32_t head_dim, float* out);
  // out[i] = the IEEE half h[i] as a float, exactly (a key block's channel minimums and steps).
  void (*halves_to_floats)(const uint16_t* h, uint32_t n, float* out);
};

extern const KvQuantUkernels kv_quant__scalar;
extern const KvAttentionUkernels kv_attention__scalar;
#if defined(__x86_64__)
extern const KvQuantUkernels kv_quant__avx2;
extern const KvAttentionUkernels kv_attention__avx2;
extern const KvQuantUkernels kv_quant__avx512;
extern const KvAttentionUkernels kv_attention__avx512;
#endif
#if defined(__aarch64__)
extern const KvQuantUkernels kv_quant__neon;
extern const KvAttentionUkernels kv_attention__neon;
#endif

// The table for `isa` (scalar when this build has none for it).
const KvQuantUkernels& kv_quant_ukernels(Isa isa);
const KvAttentionUkernels& kv_attention_ukernels(Isa isa);

// Scalar code extraction shared by every ISA's tails: code i of a packed row.
inline uint32_t kv_code_at(const uint8_t* row, uint32_t i, uint32_t bits) {
  const size_t bit = static_cast<size_t>(i) * bits;
  const uint32_t lo = row[bit >> 3];
  const uint32_t hi = ((bit & 7) + bits > 8) ? row[(bit >> 3) + 1] : 0u;
  return ((lo | (hi << 8)) >> (bit & 7)) & ((1u << bits) - 1);
}

// The scalar steps of the quantization kernels (the scalar file, and the SIMD files' tails).
// Internal linkage: a copy the compiler keeps out of line carries its own file's ISA flags.
namespace {

inline void kv_widen_range(float x, float* lo, float* hi) {
  *lo = x < *lo ? x : *lo;
  *hi = x > *hi ? x : *hi;
}

// Range of column c over a key block's tokens.
inline void kv_column_range(const float* keys, uint32_t tokens, uint32_t head_dim, uint32_t c, float* lo, float* hi) {
  float l = keys[c], h = keys[c];
  for (uint32_t t = 1; t < tokens; ++t) kv_widen_range(keys[static_cast<size_t>(t) * head_dim + c], &l, &h);
  *lo = l;
  *hi = h;
}

// clamp(round_even((x - min) * inv), 0, top), like the SIMD paths' rounding.
inline uint8_t kv_code(float x, float min, float inv, float top) {
  float r = std::nearbyint((x - min) * inv);
  r = r < 0.0f ? 0.0f : (r > top ? top : r);
  return static_cast<uint8_t>(r);
}

}  // namespace

}  // namespace tern
