// The compressed value kernels' group loop, shared by the SIMD files (kv_attention__<isa>.cpp).
// Chunks supplies kWide and kNarrow (columns) and run<B, Q, Columns>(), which accumulates
// columns [c, c + Columns) of value group g for Q queries over every token in registers; the
// columns left narrower than kNarrow go token by token here. Σ_t p*min per group is added once
// at the end. Each output element's sum runs over the tokens in order whatever the chunking.
#pragma once

#include <cstring>

#include "kernels/kv_ukernels.h"

namespace tern {

// What every chunk of one value_rows_accumulate call reads.
struct KvValueRows {
  const float* p;
  size_t p_stride;
  const uint8_t* rows;
  size_t row_bytes;
  uint32_t tokens, head_dim, groups;
};
using KvValueBias = float (*)[kKvMaxHeadDim / 8];

// The f16 minimum and step of value group g in `row`.
inline void kv_value_group_params(const uint8_t* row, uint32_t g, uint16_t* min_half, uint16_t* step_half) {
  std::memcpy(min_half, row + 4 * g, 2);
  std::memcpy(step_half, row + 4 * g + 2, 2);
}

template <typename Chunks, uint32_t B, int Q>
void kv_value_rows_accumulate(const float* p, size_t p_stride, const uint8_t* rows, uint32_t tokens, uint32_t head_dim,
                              uint32_t group, float* out) {
  const KvValueRows v{
      p, p_stride, rows, kv_value_row_bytes(B, head_dim, group), tokens, head_dim, kv_value_groups(head_dim, group)};
  float bias[Q][kKvMaxHeadDim / 8] = {};
  for (uint32_t g = 0; g < v.groups; ++g) {
    const uint32_t end = (g + 1) * group < head_dim ? (g + 1) * group : head_dim;
    uint32_t c = g * group;
    bool first = true;  // the group's first chunk also sums p*min
    for (; c + Chunks::kWide <= end; c += Chunks::kWide, first = false)
      Chunks::template run<B, Q, Chunks::kWide>(v, g, c, first, bias, out);
    for (; c + Chunks::kNarrow <= end; c += Chunks::kNarrow, first = false)
      Chunks::template run<B, Q, Chunks::kNarrow>(v, g, c, first, bias, out);
    if (c == end) continue;
    for (uint32_t t = 0; t < tokens; ++t) {
      const uint8_t* row = rows + t * v.row_bytes;
      const uint8_t* codes_row = row + 4 * static_cast<size_t>(v.groups);
      uint16_t mh, sh;
      kv_value_group_params(row, g, &mh, &sh);
      const float mn = f16_to_f32(mh), st = f16_to_f32(sh);
      for (int i = 0; i < Q; ++i) {
        const float a = p[i * p_stride + t] * st;
        if (first) bias[i][g] += p[i * p_stride + t] * mn;
        for (uint32_t cc = c; cc < end; ++cc)
          out[i * head_dim + cc] += a * static_cast<float>(kv_code_at(codes_row, cc, B));
      }
    }
  }
  for (int i = 0; i < Q; ++i)
    for (uint32_t g = 0; g < v.groups; ++g) {
      const uint32_t end = (g + 1) * group < head_dim ? (g + 1) * group : head_dim;
      for (uint32_t c = g * group; c < end; ++c) out[i * head_dim + c] += bias[i][g];
    }
}

}  // namespace tern
