// AVX-512 mixed-precision attention loops (built with -mavx512f -mavx512bw -mavx512vl on this file only).
// GCC 12 reports its own _mm512_undefined_* helpers as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstring>

#include "kernels/kv_ukernels.h"
#include "kernels/kv_value_rows_impl.h"

namespace tern {
namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Codes c..c+7 of a packed row (c a multiple of 8) as floats; reads up to 8 bytes.
template <uint32_t B>
inline __m256 codes8(const uint8_t* row, uint32_t c) {
  const uint8_t* p = row + (c / 8) * B;
  if (B == 8) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  } else {
    uint32_t word;
    std::memcpy(&word, p, 4);
    const __m256i shifts = _mm256_setr_epi32(0, B, 2 * B, 3 * B, 4 * B, 5 * B, 6 * B, 7 * B);
    const __m256i v = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(word)), shifts),
                                       _mm256_set1_epi32((1 << B) - 1));
    return _mm256_cvtepi32_ps(v);
  }
}

template <uint32_t B>
inline __m512 codes16(const uint8_t* row, uint32_t c) {
  const __m512d lo = _mm512_castps_pd(_mm512_castps256_ps512(codes8<B>(row, c)));
  return _mm512_castpd_ps(_mm512_insertf64x4(lo, _mm256_castps_pd(codes8<B>(row, c + 8)), 1));
}

inline float hsum16(__m512 v) { return _mm512_reduce_add_ps(v); }

template <uint32_t B, int Q>
void code_row_dots_t(const float* qs, const float* bias, const uint8_t* rows, size_t row_bytes, uint32_t tokens,
                     uint32_t head_dim, float scale, float* scores, size_t stride) {
  const uint32_t body = head_dim & ~7u;
  for (uint32_t t = 0; t < tokens; ++t) {
    const uint8_t* row = rows + t * row_bytes;
    __m512 acc16[Q];
    __m256 acc8[Q];
    for (int i = 0; i < Q; ++i) {
      acc16[i] = _mm512_setzero_ps();
      acc8[i] = _mm256_setzero_ps();
    }
    uint32_t c = 0;
    for (; c + 16 <= body; c += 16) {
      const __m512 codes = codes16<B>(row, c);
      for (int i = 0; i < Q; ++i) acc16[i] = _mm512_fmadd_ps(_mm512_loadu_ps(qs + i * head_dim + c), codes, acc16[i]);
    }
    for (; c < body; c += 8) {
      const __m256 codes = codes8<B>(row, c);
      for (int i = 0; i < Q; ++i) acc8[i] = _mm256_fmadd_ps(_mm256_loadu_ps(qs + i * head_dim + c), codes, acc8[i]);
    }
    for (int i = 0; i < Q; ++i) {
      float s = hsum16(acc16[i]) + hsum(acc8[i]);
      for (uint32_t k = c; k < head_dim; ++k) s += qs[i * head_dim + k] * static_cast<float>(kv_code_at(row, k, B));
      scores[i * stride + t] = scale * (bias[i] + s);
    }
  }
}

// The register-held chunks of kv_value_rows_accumulate: 32 or 16 columns of a value group.
struct ValueChunks {
  static constexpr uint32_t kWide = 32, kNarrow = 16;
  template <uint32_t B, int Q, uint32_t Columns>
  static void run(const KvValueRows& v, uint32_t g, uint32_t c, bool first, KvValueBias bias, float* out) {
    constexpr int Z = Columns / 16;
    __m512 acc[Q][Z];
    for (int i = 0; i < Q; ++i)
      for (int z = 0; z < Z; ++z) acc[i][z] = _mm512_loadu_ps(out + i * v.head_dim + c + 16 * z);
    for (uint32_t t = 0; t < v.tokens; ++t) {
      const uint8_t* row = v.rows + t * v.row_bytes;
      uint16_t mh, sh;
      kv_value_group_params(row, g, &mh, &sh);
      const float st = _cvtsh_ss(sh);
      const uint8_t* codes_row = row + 4 * static_cast<size_t>(v.groups);
      __m512 codes[Z];
      for (int z = 0; z < Z; ++z) codes[z] = codes16<B>(codes_row, c + 16 * z);
      for (int i = 0; i < Q; ++i) {
        const float pt = v.p[i * v.p_stride + t];
        const __m512 a = _mm512_set1_ps(pt * st);
        for (int z = 0; z < Z; ++z) acc[i][z] = _mm512_fmadd_ps(a, codes[z], acc[i][z]);
        if (first) bias[i][g] += pt * _cvtsh_ss(mh);
      }
    }
    for (int i = 0; i < Q; ++i)
      for (int z = 0; z < Z; ++z) _mm512_storeu_ps(out + i * v.head_dim + c + 16 * z, acc[i][z]);
  }
};

template <uint32_t B>
void code_row_dots_b(const float* qs, const float* bias, uint32_t queries, const uint8_t* rows, size_t row_bytes,
                     uint32_t tokens, uint32_t head_dim, float scale, float* scores, size_t stride) {
  switch (queries) {
    case 1: return code_row_dots_t<B, 1>(qs, bias, rows, row_bytes, tokens, head_dim, scale, scores, stride);
    case 2: return code_row_dots_t<B, 2>(qs, bias, rows, row_bytes, tokens, head_dim, scale, scores, stride);
    case 3: return code_row_dots_t<B, 3>(qs, bias, rows, row_bytes, tokens, head_dim, scale, scores, stride);
    default: return code_row_dots_t<B, 4>(qs, bias, rows, row_bytes, tokens, head_dim, scale, scores, stride);
  }
}

void code_row_dots(const float* qs, const float* bias, uint32_t queries, const uint8_t* rows, size_t row_bytes,
                   uint32_t tokens, uint32_t head_dim, uint32_t bits, float scale, float* scores, size_t stride) {
  switch (bits) {
    case 2: return code_row_dots_b<2>(qs, bias, queries, rows, row_bytes, tokens, head_dim, scale, scores, stride);
    case 3: return code_row_dots_b<3>(qs, bias, queries, rows, row_bytes, tokens, head_dim, scale, scores, stride);
    case 4: return code_row_dots_b<4>(qs, bias, queries, rows, row_bytes, tokens, head_dim, scale, scores, stride);
    default: return code_row_dots_b<8>(qs, bias, queries, rows, row_bytes, tokens, head_dim, scale, scores, stride);
  }
}

template <uint32_t B>
void value_rows_accumulate_b(const float* p, size_t p_stride, uint32_t queries, const uint8_t* rows, uint32_t tokens,
                             uint32_t head_dim, uint32_t group, float* out) {
  switch (queries) {
    case 1: return kv_value_rows_accumulate<ValueChunks, B, 1>(p, p_stride, rows, tokens, head_dim, group, out);
    case 2: return kv_value_rows_accumulate<ValueChunks, B, 2>(p, p_stride, rows, tokens, head_dim, group, out);
    case 3: return kv_value_rows_accumulate<ValueChunks, B, 3>(p, p_stride, rows, tokens, head_dim, group, out);
    default: return kv_value_rows_accumulate<ValueChunks, B, 4>(p, p_stride, rows, tokens, head_dim, group, out);
  }
}

void value_rows_accumulate(const float* p, size_t p_stride, uint32_t queries, const uint8_t* rows, uint32_t tokens,
                           uint32_t head_dim, uint32_t group, uint32_t bits, float* out) {
  switch (bits) {
    case 2: return value_rows_accumulate_b<2>(p, p_stride, queries, rows, tokens, head_dim, group, out);
    case 3: return value_rows_accumulate_b<3>(p, p_stride, queries, rows, tokens, head_dim, group, out);
    case 4: return value_rows_accumulate_b<4>(p, p_stride, queries, rows, tokens, head_dim, group, out);
    default: return value_rows_accumulate_b<8>(p, p_stride, queries, rows, tokens, head_dim, group, out);
  }
}


void exact_scores_f32(const float* q, const float* keys, uint32_t tokens, uint32_t head_dim, float scale,
                      float* scores) {
  for (uint32_t t = 0; t < tokens; ++t) {
    const float* k = keys + static_cast<size_t>(t) * head_dim;
    __m512 acc = _mm512_setzero_ps();
    uint32_t c = 0;
    for (; c + 16 <= head_dim; c += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + c), _mm512_loadu_ps(k + c), acc);
    float s = hsum16(acc);
    for (; c < head_dim; ++c) s += q[c] * k[c];
    scores[t] = scale * s;
  }
}

void exact_scores_f16(const float* q, const uint16_t* keys, uint32_t tokens, uint32_t head_dim, float scale,
                      float* scores) {
  for (uint32_t t = 0; t < tokens; ++t) {
    const uint16_t* k = keys + static_cast<size_t>(t) * head_dim;
    __m512 acc = _mm512_setzero_ps();
    uint32_t c = 0;
    for (; c + 16 <= head_dim; c += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + c), load_f16x16(k + c), acc);
    float s = hsum16(acc);
    for (; c < head_dim; ++c) s += q[c] * f16_to_f32(k[c]);
    scores[t] = scale * s;
  }
}

void exact_accumulate_f32(const float* p, const float* values, uint32_t tokens, uint32_t head_dim, float* out) {
  for (uint32_t t = 0; t < tokens; ++t) {
    const float* v = values + static_cast<size_t>(t) * head_dim;
    const __m512 w = _mm512_set1_ps(p[t]);
    uint32_t c = 0;
    for (; c + 16 <= head_dim; c += 16)
      _mm512_storeu_ps(out + c, _mm512_fmadd_ps(w, _mm512_loadu_ps(v + c), _mm512_loadu_ps(out + c)));
    for (; c < head_dim; ++c) out[c] += p[t] * v[c];
  }
}

void exact_accumulate_f16(const float* p, const uint16_t* values, uint32_t tokens, uint32_t head_dim, float* out) {
  for (uint32_t t = 0; t < tokens; ++t) {
    const uint16_t* v = values + static_cast<size_t>(t) * head_dim;
    const __m512 w = _mm512_set1_ps(p[t]);
    uint32_t c = 0;
    for (; c + 16 <= head_dim; c += 16)
      _mm512_storeu_ps(out + c, _mm512_fmadd_ps(w, load_f16x16(v + c), _mm512_loadu_ps(out + c)));
    for (; c < head_dim; ++c) out[c] += p[t] * f16_to_f32(v[c]);
  }
}

void halves_to_floats(const uint16_t* h, uint32_t n, float* out) {
  uint32_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, load_f16x16(h + i));
  for (; i < n; ++i) out[i] = f16_to_f32(h[i]);
}

}  // namespace

const KvAttentionUkernels kv_attention__avx512 = {
    code_row_dots,        value_rows_accumulate, exact_scores_f32, exact_scores_f16,
    exact_accumulate_f32, exact_accumulate_f16,  halves_to_floats};

}  // namespace tern
