// Portable reference for the mixed-precision attention inner loops.
#include "kernels/kv_ukernels.h"

namespace tern {
namespace {

void code_row_dots(const float* qs, const float* bias, uint32_t queries, const uint8_t* rows, size_t row_bytes,
                   uint32_t tokens, uint32_t head_dim, uint32_t bits, float scale, float* scores, size_t stride) {
  for (uint32_t i = 0; i < queries; ++i) {
    const float* q = qs + static_cast<size_t>(i) * head_dim;
    for (uint32_t t = 0; t < tokens; ++t) {
      const uint8_t* row = rows + t * row_bytes;
      float acc = 0.0f;
      for (uint32_t c = 0; c < head_dim; ++c) acc += q[c] * static_cast<float>(kv_code_at(row, c, bits));
      scores[i * stride + t] = scale * (bias[i] + acc);
    }
  }
}

void value_rows_accumulate(const float* p, size_t p_stride, uint32_t queries, const uint8_t* rows, uint32_t tokens,
                           uint32_t head_dim, uint32_t group, uint32_t bits, float* out) {
  const uint32_t groups = kv_value_groups(head_dim, group);
  const size_t row_bytes = kv_value_row_bytes(bits, head_dim, group);
  for (uint32_t i = 0; i < queries; ++i) {
    float* o = out + static_cast<size_t>(i) * head_dim;
    for (uint32_t t = 0; t < tokens; ++t) {
      const float w = p[i * p_stride + t];
      const uint8_t* row = rows + t * row_bytes;
      const uint8_t* codes = row + 4 * static_cast<size_t>(groups);
      for (uint32_t g = 0; g < groups; ++g) {
        const float mn = f16_to_f32(static_cast<uint16_t>(row[4 * g] | (row[4 * g + 1] << 8)));
        const float st = f16_to_f32(static_cast<uint16_t>(row[4 * g + 2] | (row[4 * g + 3] << 8)));
        const float a = w * st, b = w * mn;
        const uint32_t end = (g + 1) * group < head_dim ? (g + 1) * group : head_dim;
        for (uint32_t c = g * group; c < end; ++c) o[c] += a * static_cast<float>(kv_code_at(codes, c, bits)) + b;
      }
    }
  }
}

void exact_scores_f32(const float* q, const float* keys, uint32_t tokens, uint32_t head_dim, float scale,
                      float* scores) {
  for (uint32_t t = 0; t < tokens; ++t) {
    const float* k = keys + static_cast<size_t>(t) * head_dim;
    float acc = 0.0f;
    for (uint32_t c = 0; c < head_dim; ++c) acc += q[c] * k[c];
    scores[t] = scale * acc;
  }
}

void exact_scores_f16(const float* q, const uint16_t* keys, uint32_t tokens, uint32_t head_dim, float scale,
                      float* scores) {
  for (uint32_t t = 0; t < tokens; ++t) {
    const uint16_t* k = keys + static_cast<size_t>(t) * head_dim;
    float acc = 0.0f;
    for (uint32_t c = 0; c < head_dim; ++c) acc += q[c] * f16_to_f32(k[c]);
    scores[t] = scale * acc;
  }
}

void exact_accumulate_f32(const float* p, const float* values, uint32_t tokens, uint32_t head_dim, float* out) {
  for (uint32_t t = 0; t < tokens; ++t) {
    const float* v = values + static_cast<size_t>(t) * head_dim;
    for (uint32_t c = 0; c < head_dim; ++c) out[c] += p[t] * v[c];
  }
}

void exact_accumulate_f16(const float* p, const uint16_t* values, uint32_t tokens, uint32_t head_dim, float* out) {
  for (uint32_t t = 0; t < tokens; ++t) {
    const uint16_t* v = values + static_cast<size_t>(t) * head_dim;
    for (uint32_t c = 0; c < head_dim; ++c) out[c] += p[t] * f16_to_f32(v[c]);
  }
}

void halves_to_floats(const uint16_t* h, uint32_t n, float* out) {
  for (uint32_t i = 0; i < n; ++i) out[i] = f16_to_f32(h[i]);
}

}  // namespace

const KvAttentionUkernels kv_attention__scalar = {code_row_dots,    value_rows_accumulate, exact_scores_f32,
                                                  exact_scores_f16, exact_accumulate_f32,  exact_accumulate_f16,
                                                  halves_to_floats};

}  // namespace tern
