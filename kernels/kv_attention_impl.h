// The compressed-cache attention loops shared by kv_attention__{avx2,avx512,neon}.cpp. Every
// function is a template on the including file's traits `K` (internal to that file, so each
// instantiation carries only its ISA flags): the f32 vector ops of f32_vec_<isa>.h (Vec,
// kWidth, zero, set1, load of floats or halves, store, fma, hsum, half) and
//   row_dots<B, Q>(qs, row, head_dim, sums): a key row's vector part for Q queries (below);
//   codes<B>(row, c, Vec* v): codes c.. of a packed row as floats, kCodeColumns of them
//   (kWidth, at least 8: whole bytes for every width) in kCodeColumns / kWidth vectors.
#pragma once

#include <type_traits>

#include "kernels/kv_ukernels.h"
#include "kernels/kv_value_rows_impl.h"

namespace tern {
namespace kv_attention_impl {

namespace {  // internal linkage: each file's copy carries its own ISA flags
inline float to_float(float x) { return x; }
inline float to_float(uint16_t h) { return f16_to_f32(h); }
}  // namespace

// The register-held chunks of kv_value_rows_accumulate: each code vector is unpacked once
// for every query.
template <typename K>
struct ValueChunks {
  static constexpr uint32_t kCodeColumns = K::kWidth > 8 ? K::kWidth : 8;
  static constexpr uint32_t kWide = 2 * kCodeColumns, kNarrow = kCodeColumns;
  template <uint32_t B, int Q, uint32_t Columns>
  static void run(const KvValueRows& v, uint32_t g, uint32_t c, bool first, KvValueBias bias, float* out) {
    constexpr int Z = Columns / K::kWidth;
    typename K::Vec acc[Q][Z];
    for (int i = 0; i < Q; ++i)
      for (int z = 0; z < Z; ++z) acc[i][z] = K::load(out + i * v.head_dim + c + K::kWidth * z);
    for (uint32_t t = 0; t < v.tokens; ++t) {
      const uint8_t* row = v.rows + t * v.row_bytes;
      uint16_t mh, sh;
      kv_value_group_params(row, g, &mh, &sh);
      const float st = K::half(sh);
      const uint8_t* codes_row = row + 4 * static_cast<size_t>(v.groups);
      typename K::Vec codes[Z];
      for (int z = 0; z < Z; z += kCodeColumns / K::kWidth)
        K::template codes<B>(codes_row, c + K::kWidth * z, codes + z);
      for (int i = 0; i < Q; ++i) {
        const float pt = v.p[i * v.p_stride + t];
        const typename K::Vec a = K::set1(pt * st);
        for (int z = 0; z < Z; ++z) acc[i][z] = K::fma(a, codes[z], acc[i][z]);
        if (first) bias[i][g] += pt * K::half(mh);
      }
    }
    for (int i = 0; i < Q; ++i)
      for (int z = 0; z < Z; ++z) K::store(out + i * v.head_dim + c + K::kWidth * z, acc[i][z]);
  }
};

// The key loop: K::row_dots<B, Q> sums the row's whole vectors into sums[i] and returns the
// first column it left; the rest go code by code here.
template <typename K, uint32_t B, uint32_t Q>
void code_row_dots_q(const float* qs, const float* bias, const uint8_t* rows, size_t row_bytes, uint32_t tokens,
                     uint32_t head_dim, float scale, float* scores, size_t stride) {
  for (uint32_t t = 0; t < tokens; ++t) {
    const uint8_t* row = rows + t * row_bytes;
    float sums[Q];
    const uint32_t c = K::template row_dots<B, Q>(qs, row, head_dim, sums);
    for (uint32_t i = 0; i < Q; ++i) {
      float s = sums[i];
      for (uint32_t k = c; k < head_dim; ++k) s += qs[i * head_dim + k] * static_cast<float>(kv_code_at(row, k, B));
      scores[i * stride + t] = scale * (bias[i] + s);
    }
  }
}

// B = bits (2, 3, 4 or 8).
template <typename F>
inline void with_bits(uint32_t bits, F&& f) {
  with_constant<uint32_t, 2, 3, 4, 8>(bits, f);
}

template <typename K>
void code_row_dots(const float* qs, const float* bias, uint32_t queries, const uint8_t* rows, size_t row_bytes,
                   uint32_t tokens, uint32_t head_dim, uint32_t bits, float scale, float* scores, size_t stride) {
  with_bits(bits, [&](auto b) {
    with_query_count(queries, [&](auto q) {
      code_row_dots_q<K, decltype(b)::value, decltype(q)::value>(qs, bias, rows, row_bytes, tokens, head_dim, scale,
                                                                 scores, stride);
    });
  });
}

template <typename K>
void value_rows_accumulate(const float* p, size_t p_stride, uint32_t queries, const uint8_t* rows, uint32_t tokens,
                           uint32_t head_dim, uint32_t group, uint32_t bits, float* out) {
  with_bits(bits, [&](auto b) {
    with_query_count(queries, [&](auto q) {
      kv_value_rows_accumulate<ValueChunks<K>, decltype(b)::value, decltype(q)::value>(p, p_stride, rows, tokens,
                                                                                       head_dim, group, out);
    });
  });
}

// Keys kept exact (f32 or f16 elements): scores[t] = scale * Σ_c q[c] * key[t][c].
template <typename K, typename Element>
void exact_scores(const float* q, const Element* keys, uint32_t tokens, uint32_t head_dim, float scale, float* scores) {
  for (uint32_t t = 0; t < tokens; ++t) {
    const Element* k = keys + static_cast<size_t>(t) * head_dim;
    typename K::Vec acc = K::zero();
    uint32_t c = 0;
    for (; c + K::kWidth <= head_dim; c += K::kWidth) acc = K::fma(K::load(q + c), K::load(k + c), acc);
    float s = K::hsum(acc);
    for (; c < head_dim; ++c) s += q[c] * to_float(k[c]);
    scores[t] = scale * s;
  }
}

// out[c] += Σ_t p[t] * value[t][c] over exact values.
template <typename K, typename Element>
void exact_accumulate(const float* p, const Element* values, uint32_t tokens, uint32_t head_dim, float* out) {
  for (uint32_t t = 0; t < tokens; ++t) {
    const Element* v = values + static_cast<size_t>(t) * head_dim;
    const typename K::Vec w = K::set1(p[t]);
    uint32_t c = 0;
    for (; c + K::kWidth <= head_dim; c += K::kWidth) K::store(out + c, K::fma(w, K::load(v + c), K::load(out + c)));
    for (; c < head_dim; ++c) out[c] += p[t] * to_float(v[c]);
  }
}

template <typename K>
void halves_to_floats(const uint16_t* h, uint32_t n, float* out) {
  uint32_t i = 0;
  for (; i + K::kWidth <= n; i += K::kWidth) K::store(out + i, K::load(h + i));
  for (; i < n; ++i) out[i] = f16_to_f32(h[i]);
}

template <typename K>
constexpr KvAttentionUkernels ukernels() {
  return {code_row_dots<K>,           value_rows_accumulate<K>,      exact_scores<K, float>, exact_scores<K, uint16_t>,
          exact_accumulate<K, float>, exact_accumulate<K, uint16_t>, halves_to_floats<K>};
}

}  // namespace kv_attention_impl
}  // namespace tern
