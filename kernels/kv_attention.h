// Attention for one query head over a mixed-precision KV history, reading quantized
// blocks in place: scores use q·(min + step*code) = Σ q*min + Σ (q*step)*code per key
// channel, and values accumulate p*step*code + p*min per value group, so no cache row
// is ever dequantized into a buffer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kv_quant.h"

namespace tern {

enum class KvSegmentKind : uint8_t {
  ExactF32 = 0,   // keys/values: tokens x head_dim floats
  ExactF16 = 1,   // keys/values: tokens x head_dim IEEE halves
  Quantized = 2,  // keys: one key block; values: block_tokens value rows (first `tokens` used)
};

// A run of consecutive positions stored one way.
struct KvSegment {
  KvSegmentKind kind = KvSegmentKind::ExactF32;
  uint32_t tokens = 0;
  const void* keys = nullptr;
  const void* values = nullptr;
};

struct KvQuantLayout {
  uint32_t key_bits = 4;
  uint32_t value_bits = 4;
  uint32_t block_tokens = 32;
  uint32_t value_group = 32;
};

// scores[t] = scale * q·k_t over the segment's tokens.
void kv_segment_scores(Isa isa, const KvSegment& seg, const KvQuantLayout& layout, uint32_t head_dim, const float* q,
                       float scale, float* scores);
// out += Σ_t p[t] * v_t over the segment's tokens.
void kv_segment_accumulate(Isa isa, const KvSegment& seg, const KvQuantLayout& layout, uint32_t head_dim,
                           const float* p, float* out);
// The same for `queries` query rows (head_dim apart, any count): scores of query i go to
// scores + i*stride, probabilities are read from p + i*p_stride, outputs to out + i*head_dim.
// Quantized blocks are unpacked once per group of up to 4 queries (GQA query heads).
void kv_segment_scores_multi(Isa isa, const KvSegment& seg, const KvQuantLayout& layout, uint32_t head_dim,
                             const float* q, uint32_t queries, float scale, float* scores, size_t stride);
void kv_segment_accumulate_multi(Isa isa, const KvSegment& seg, const KvQuantLayout& layout, uint32_t head_dim,
                                 const float* p, size_t p_stride, uint32_t queries, float* out);
// In place: x <- softmax(x).
void kv_softmax(float* x, size_t n);

// Full attention of one (already rotated, if the layout is rotated) query over the
// segments in order; `scores` holds at least the total token count.
void kv_attend(Isa isa, const KvSegment* segs, size_t seg_count, const KvQuantLayout& layout, uint32_t head_dim,
               const float* q, float scale, float* scores, float* out);

}  // namespace tern
