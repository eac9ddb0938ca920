#include "runtime/engine/forward.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "runtime/base/fast_exp.h"
#include "runtime/base/rope.h"
#include "runtime/engine/arena_carver.h"
#include "runtime/engine/model.h"

namespace tern {

namespace {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

inline float silu_vectorizable(float x) { return x / (1.0f + exp_vectorizable(-x)); }

// GELU (tanh form): 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3).
inline float gelu_tanh_vectorizable(float x) {
  const float two_u = 1.5957691216057308f * (x + 0.044715f * (x * x * x));
  return x / (1.0f + exp_vectorizable(-two_u));
}

// gate[i] = act(gate[i]) * up[i]; separate buffers, so the loops vectorize without versioning.
void gelu_tanh_gate(float* __restrict gate, const float* __restrict up, size_t n) {
  for (size_t i = 0; i < n; ++i) gate[i] = gelu_tanh_vectorizable(gate[i]) * up[i];
}
void silu_gate(float* __restrict gate, const float* __restrict up, size_t n) {
  for (size_t i = 0; i < n; ++i) gate[i] = silu_vectorizable(gate[i]) * up[i];
}

void quantize_rows(ForwardScratch& s, const float* in, uint32_t n, size_t cols, size_t stride) {
  for (uint32_t t = 0; t < n; ++t) {
    quantize_row_absmax_int8(in + t * stride, cols, s.xq + t * stride, &s.xq_scale[t], &s.xq_sum[t]);
  }
}

QuantizedActivations activations(const ForwardScratch& s, uint32_t n, size_t cols, size_t stride) {
  QuantizedActivations a;
  a.q = s.xq;
  a.scales = s.xq_scale;
  a.sums = s.xq_sum;
  a.tokens = n;
  a.cols = cols;
  a.stride = stride;
  return a;
}

// Σ x², in 16 interleaved partial sums added up in a fixed order: as one running sum it was a
// chain of dependent adds, ~3 % of a 2B-4T prefill at 1 thread; 16 independent lanes the
// compiler vectorizes without reassociating anything (the same result on every ISA).
float sum_of_squares(const float* x, size_t n) {
  constexpr size_t kLanes = 16;
  float part[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) part[j] += x[i + j] * x[i + j];
  for (size_t j = 0; i < n; ++i, ++j) part[j] += x[i] * x[i];
  for (size_t w = kLanes / 2; w > 0; w /= 2)
    for (size_t j = 0; j < w; ++j) part[j] += part[j + w];
  return part[0];
}

// How the input of a ternary linear is normalized before it is quantized.
enum class NormKind { None, Weighted, ParameterFree };

// Normalizes n rows of `cols` (row stride `in_stride`) into s.xn (stride `wide`) and quantizes them.
void normalize_and_quantize(ForwardScratch& s, const float* in, size_t in_stride, uint32_t n, size_t cols, size_t wide,
                            NormKind kind, const float* weight, float eps) {
  for (uint32_t t = 0; t < n; ++t) {
    const float* row = in + t * in_stride;
    float* out = s.xn + t * wide;
    switch (kind) {
      case NormKind::Weighted: rms_norm(row, weight, cols, eps, out); break;
      case NormKind::ParameterFree: bitllama_norm(row, cols, out); break;
      case NormKind::None: std::memcpy(out, row, cols * sizeof(float)); break;
    }
  }
  quantize_rows(s, s.xn, n, cols, wide);
}

// 1 / rms of each of n rows of `in` [n][hidden] into inv[n]: what rms_norm multiplies by.
void inverse_rms(const float* in, uint32_t n, size_t cols, float eps, float* inv) {
  for (uint32_t t = 0; t < n; ++t) {
    inv[t] = 1.0f / std::sqrt(sum_of_squares(in + t * cols, cols) / static_cast<float>(cols) + eps);
  }
}

// The product of one ternary linear whose input has a norm of its own (the embedding
// families' BitLinear): `in` [n][hidden] (whose rows' 1 / rms are `inv`, shared by the
// projections of one input) normalized by `weight` exactly as rms_norm does, quantized,
// multiplied.
void project(const Model& model, ForwardScratch& s, const float* in, const float* inv, uint32_t n, size_t wide,
             const float* weight, const TernaryMatrix& w, float* out, size_t out_stride) {
  const size_t hidden = model.config().hidden;
  for (uint32_t t = 0; t < n; ++t) {
    const float* x = in + t * hidden;
    float* y = s.xn + t * wide;
    for (size_t i = 0; i < hidden; ++i) y[i] = x[i] * inv[t] * weight[i];
  }
  quantize_rows(s, s.xn, n, hidden, wide);
  ternary_matmul(w, activations(s, n, hidden, wide), out, out_stride, model.pool());
}

// RMSNorm of n rows of `cols` (stride `stride`) in place.
void norm_rows(float* rows, uint32_t n, size_t cols, size_t stride, const float* weight, float eps) {
  for (uint32_t t = 0; t < n; ++t) rms_norm(rows + t * stride, weight, cols, eps, rows + t * stride);
}

NormKind norm_kind(const ModelConfig& c, const float* weight) {
  if (!family_traits(c.family)->layer_norms) return NormKind::ParameterFree;
  return weight != nullptr ? NormKind::Weighted : NormKind::None;
}

// The widths one forward pass works with.
struct Widths {
  size_t hidden, hd, half, qd, kvd, ffn, wide;  // wide: the widest matmul input
};

Widths widths_of(const ModelConfig& c) {
  Widths d;
  d.hidden = c.hidden, d.hd = c.head_dim, d.half = d.hd / 2;
  d.qd = static_cast<size_t>(c.heads) * d.hd, d.kvd = static_cast<size_t>(c.kv_heads) * d.hd;
  d.ffn = c.ffn_hidden;
  d.wide = std::max({d.hidden, d.qd, d.ffn});
  return d;
}

}  // namespace

void rms_norm(const float* x, const float* weight, size_t n, float eps, float* out) {
  const float inv = 1.0f / std::sqrt(sum_of_squares(x, n) / static_cast<float>(n) + eps);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] * inv * weight[i];
}

void bitllama_norm(const float* x, size_t n, float* out) {
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) sum += x[i] * x[i];
  const float rms = std::sqrt(sum / static_cast<float>(n));
  const float denom = rms * static_cast<float>(n);
  if (!(denom > 0.0f)) {
    for (size_t i = 0; i < n; ++i) out[i] = 0.0f;
    return;
  }
  // Divide as the reference does: multiplying by the reciprocal moves int8 rounding
  // boundaries enough to flip a 0.02-logit decision on bitllama2c-3M.
  for (size_t i = 0; i < n; ++i) out[i] = x[i] / denom;
}

Error carve_forward_scratch(const ModelConfig& c, uint32_t batch, size_t scores_per_head, ArenaAllocator* arena,
                            ForwardScratch* s, size_t* bytes) {
  TERN_CHECK_OR_RETURN(batch > 0 && scores_per_head > 0, Error::InvalidArgument,
                       "scratch for batch %u, %zu scores per head", batch, scores_per_head);
  const Widths d = widths_of(c);
  const size_t hidden = d.hidden, qd = d.qd, kvd = d.kvd, ffn = d.ffn, wide = d.wide;
  ArenaCarver carve(arena, bytes);
  s->batch = batch;
  s->scores_per_head = scores_per_head;
  TERN_RETURN_IF_ERROR(carve.take(&s->x, batch * hidden));
  TERN_RETURN_IF_ERROR(carve.take(&s->xn, batch * wide));
  TERN_RETURN_IF_ERROR(carve.take(&s->xq, batch * wide));
  TERN_RETURN_IF_ERROR(carve.take(&s->xq_scale, batch));
  TERN_RETURN_IF_ERROR(carve.take(&s->xq_sum, batch));
  TERN_RETURN_IF_ERROR(carve.take(&s->q, batch * qd));
  TERN_RETURN_IF_ERROR(carve.take(&s->k, batch * kvd));
  TERN_RETURN_IF_ERROR(carve.take(&s->v, batch * kvd));
  TERN_RETURN_IF_ERROR(carve.take(&s->att, batch * qd));
  TERN_RETURN_IF_ERROR(carve.take(&s->gate, batch * ffn));
  TERN_RETURN_IF_ERROR(carve.take(&s->up, batch * ffn));
  TERN_RETURN_IF_ERROR(carve.take(&s->proj, batch * hidden));
  TERN_RETURN_IF_ERROR(carve.take(&s->rope_cos, batch * (c.head_dim / 2)));
  TERN_RETURN_IF_ERROR(carve.take(&s->rope_sin, batch * (c.head_dim / 2)));
  TERN_RETURN_IF_ERROR(carve.take(&s->scores, static_cast<size_t>(c.kv_heads) * s->scores_per_head));
  TERN_RETURN_IF_ERROR(carve.take(&s->q_sinks, batch * qd));
  TERN_RETURN_IF_ERROR(carve.take(&s->sink_cos, c.head_dim / 2));
  TERN_RETURN_IF_ERROR(carve.take(&s->sink_sin, c.head_dim / 2));
  TERN_RETURN_IF_ERROR(carve.take(&s->logits, c.embedding ? 0 : c.vocab));  // embedding models have no logits
  uint8_t* head_work = nullptr;
  TERN_RETURN_IF_ERROR(carve.take(&head_work, c.embedding ? 0 : dense_gemv_tokens_work_bytes(hidden, batch)));
  s->head_work = head_work;
  const FamilyTraits* traits = family_traits(c.family);
  const bool local_rope = c.sliding_layers != 0;
  TERN_RETURN_IF_ERROR(carve.take(&s->xh, traits != nullptr && traits->projection_norms ? batch * hidden : 0));
  TERN_RETURN_IF_ERROR(carve.take(&s->xh_inv_rms, batch));
  TERN_RETURN_IF_ERROR(carve.take(&s->rope_local_cos, local_rope ? batch * (c.head_dim / 2) : 0));
  TERN_RETURN_IF_ERROR(carve.take(&s->rope_local_sin, local_rope ? batch * (c.head_dim / 2) : 0));
  TERN_RETURN_IF_ERROR(carve.take(&s->attend_from, batch));
  return Error::Ok;
}

namespace {

// A sequence's rows in the pass: where they start, and its cache and scratch.
struct Rows {
  KvCache* kv;
  const ForwardScratch* own;
  uint32_t r0, n, pos0;
};

Rows rows_of(const ForwardSequence& q) { return Rows{q.kv, q.own, q.row, q.n, q.pos0}; }

// A sequence's tokens' embedding rows into the residual stream and their positions' RoPE angles.
void embed_tokens(const Model& model, ForwardScratch& s, const int32_t* tokens, const Rows& q) {
  const ModelConfig& c = model.config();
  const size_t hidden = c.hidden, half = c.head_dim / 2;
  for (uint32_t i = 0; i < q.n; ++i) {
    const uint32_t t = q.r0 + i;
    float* row = s.x + t * hidden;
    dense_row_f32(model.weights().tok_embeddings, static_cast<size_t>(tokens[i]), row);
    if (c.embedding_scale != 1.0f) {
      for (size_t j = 0; j < hidden; ++j) row[j] *= c.embedding_scale;
    }
    const uint32_t position = q.pos0 + i - (s.segment_start != nullptr ? s.segment_start[t] : 0);
    rope_angles(model.rope_inv_freq(), half, position, s.rope_cos + t * half, s.rope_sin + t * half);
    if (c.sliding_layers != 0) {
      rope_angles(model.rope_local_inv_freq(), half, position, s.rope_local_cos + t * half,
                  s.rope_local_sin + t * half);
    }
  }
}

// Layer l's q, k and v of the n rows of the residual stream (normalized, projected, and with
// the q/k head norms of the families that have them).
void project_qkv(const Model& model, ForwardScratch& s, uint32_t l, uint32_t n, const Widths& d) {
  const ModelConfig& c = model.config();
  const LayerWeights& lw = model.layer(l);
  const LayerRuntime& lr = model.layer_runtime(l);
  const size_t hidden = d.hidden, wide = d.wide, qd = d.qd, kvd = d.kvd;
  if (family_traits(c.family)->projection_norms) {
    // attn_norm once, then each projection's own norm of that.
    for (uint32_t t = 0; t < n; ++t) rms_norm(s.x + t * hidden, lr.attn_norm, hidden, c.norm_eps, s.xh + t * hidden);
    inverse_rms(s.xh, n, hidden, c.norm_eps, s.xh_inv_rms);
    project(model, s, s.xh, s.xh_inv_rms, n, wide, lr.wq_in_norm, lw.wq, s.q, qd);
    project(model, s, s.xh, s.xh_inv_rms, n, wide, lr.wk_in_norm, lw.wk, s.k, kvd);
    project(model, s, s.xh, s.xh_inv_rms, n, wide, lr.wv_in_norm, lw.wv, s.v, kvd);
  } else {
    normalize_and_quantize(s, s.x, hidden, n, hidden, wide, norm_kind(c, lr.attn_norm), lr.attn_norm, c.norm_eps);
    const QuantizedActivations xa = activations(s, n, hidden, wide);
    const TernaryMatmulOutput qkv[] = {{&lw.wq, s.q, qd}, {&lw.wk, s.k, kvd}, {&lw.wv, s.v, kvd}};
    ternary_matmul_fused(qkv, 3, xa, model.pool());
  }
  if (family_traits(c.family)->qk_norms) {
    norm_rows(s.q, n * c.heads, d.hd, d.hd, lr.q_norm, c.norm_eps);
    norm_rows(s.k, n * c.kv_heads, d.hd, d.hd, lr.k_norm, c.norm_eps);
  }
}

// Rotates layer l's queries and keys of a sequence's rows to their positions and writes the
// keys and values to its cache.
Error rope_and_cache(const Model& model, ForwardScratch& s, uint32_t l, const Rows& q, const Widths& d) {
  const ModelConfig& c = model.config();
  const bool adjacent = c.rope_style == RopeStyle::AdjacentPairs;
  const bool sliding = layer_is_sliding(c, l);
  const size_t hd = d.hd, half = d.half, qd = d.qd, kvd = d.kvd;
  const float* layer_cos = sliding ? s.rope_local_cos : s.rope_cos;
  const float* layer_sin = sliding ? s.rope_local_sin : s.rope_sin;
  for (uint32_t i = 0; i < q.n; ++i) {
    const uint32_t t = q.r0 + i;
    const float* cs = layer_cos + t * half;
    const float* sn = layer_sin + t * half;
    for (uint32_t h = 0; h < c.heads; ++h) {
      float* head = s.q + t * qd + h * hd;
      adjacent ? rope_adjacent_pairs(head, hd, cs, sn) : rope_rotate_half(head, hd, cs, sn);
    }
    for (uint32_t h = 0; h < c.kv_heads; ++h) {
      float* head = s.k + t * kvd + h * hd;
      adjacent ? rope_adjacent_pairs(head, hd, cs, sn) : rope_rotate_half(head, hd, cs, sn);
      TERN_RETURN_IF_ERROR(q.kv->write(l, h, q.pos0 + i, head, s.v + t * kvd + h * hd));
    }
  }
  return Error::Ok;
}

// Layer l's attention of a sequence's queries over its cache into its rows of s.att.
// `partial_attention`: rows attend from a later first position (packed texts, sliding windows).
void attend(const Model& model, ForwardScratch& s, uint32_t l, const Rows& q, bool partial_attention, const Widths& d) {
  const ModelConfig& c = model.config();
  const bool sliding = layer_is_sliding(c, l);
  const Rope rope{model.rope_inv_freq(), c.rope_style == RopeStyle::AdjacentPairs};
  uint32_t* attend_from = s.attend_from + q.r0;
  if (partial_attention) {
    for (uint32_t i = 0; i < q.n; ++i) {
      const uint32_t p = q.pos0 + i;
      uint32_t from = s.segment_start != nullptr ? s.segment_start[q.r0 + i] : 0;
      if (sliding && p + 1 > c.sliding_window) from = std::max(from, p + 1 - c.sliding_window);
      attend_from[i] = from;
    }
  }
  // StreamingLLM's "positions within the cache": after E non-sink positions were dropped,
  // the query at position p scores the sinks as if it stood at p - E. Keys are cached after
  // RoPE at their original positions, so rotating the (already rotated) query by -E
  // positions gives exactly that; every other kept key keeps its true distance p - j,
  // which the eviction bounds by the capacity.
  const bool reposition = q.own->reposition_sinks;
  const uint32_t evicted = reposition ? q.kv->evicted_positions(l) : 0;
  float* queries = s.q + static_cast<size_t>(q.r0) * d.qd;
  float* q_sinks = s.q_sinks + static_cast<size_t>(q.r0) * d.qd;
  if (evicted > 0) {
    std::memcpy(q_sinks, queries, static_cast<size_t>(q.n) * d.qd * sizeof(float));
    rope.rotate_back(q_sinks, q.n * c.heads, c.head_dim, evicted, s.sink_cos, s.sink_sin);
  }
  float* out = s.att + static_cast<size_t>(q.r0) * d.qd;
  KvAttention attention;
  attention.q = queries;
  attention.q_sinks = evicted > 0 ? q_sinks : nullptr;
  attention.out = out;
  attention.n = q.n;
  attention.pos0 = q.pos0;
  attention.heads = c.heads;
  attention.scale = c.attention_scale > 0.0f ? c.attention_scale : 1.0f / std::sqrt(static_cast<float>(d.hd));
  attention.scores = q.own->scores;
  attention.scores_per_head = q.own->scores_per_head;
  attention.observer = s.observer;
  attention.rope = reposition ? &rope : nullptr;
  attention.first = partial_attention ? attend_from : nullptr;
  q.kv->attend(l, attention, model.pool());
  if (s.observer != nullptr && s.observer->on_output != nullptr) {
    s.observer->on_output(s.observer->user, l, q.pos0, q.n, out);
  }
}

bool aborted(const std::atomic<int>* abort) { return abort != nullptr && abort->load(std::memory_order_relaxed) != 0; }

// A sequence's result, with the message fail() just recorded when it failed.
void set_status(ForwardSequence& q, Error e) {
  q.status = e;
  if (e != Error::Ok) std::snprintf(q.message, sizeof q.message, "%s", last_error_message());
}

// Layer l's attention block over every running sequence: the residual stream gains the
// projected attention output. A sequence whose cache write fails, or whose abort flag is set,
// stops here (its rows still pass through the shared matmuls, unread).
void attention_block(const Model& model, ForwardScratch& s, uint32_t l, ForwardSequence* seqs, size_t count, uint32_t n,
                     bool partial_attention, const Widths& d) {
  const ModelConfig& c = model.config();
  const LayerRuntime& lr = model.layer_runtime(l);
  const size_t hidden = d.hidden, qd = d.qd;
  project_qkv(model, s, l, n, d);
  for (size_t i = 0; i < count; ++i) {
    ForwardSequence& q = seqs[i];
    if (q.status != Error::Ok) continue;
    if (aborted(q.abort)) {
      set_status(q, fail(Error::Aborted, "aborted at layer %u", l));
      continue;
    }
    set_status(q, rope_and_cache(model, s, l, rows_of(q), d));
    if (q.status == Error::Ok) attend(model, s, l, rows_of(q), partial_attention, d);
  }
  normalize_and_quantize(s, s.att, qd, n, qd, d.wide, norm_kind(c, lr.attn_sub_norm), lr.attn_sub_norm, c.norm_eps);
  ternary_matmul(model.layer(l).wo, activations(s, n, qd, d.wide), s.proj, hidden, model.pool());
  if (family_traits(c.family)->post_norms) norm_rows(s.proj, n, hidden, hidden, lr.post_attn_norm, c.norm_eps);
  for (size_t i = 0; i < n * hidden; ++i) s.x[i] += s.proj[i];
}

// Layer l's feed-forward block: the residual stream gains down(act(gate) * up).
void ffn_block(const Model& model, ForwardScratch& s, uint32_t l, uint32_t n, const Widths& d) {
  const ModelConfig& c = model.config();
  const FamilyTraits& traits = *family_traits(c.family);
  const LayerWeights& lw = model.layer(l);
  const LayerRuntime& lr = model.layer_runtime(l);
  const ThreadPool* pool = model.pool();
  const size_t hidden = d.hidden, ffn = d.ffn, wide = d.wide;
  if (traits.projection_norms) {
    for (uint32_t t = 0; t < n; ++t) rms_norm(s.x + t * hidden, lr.ffn_norm, hidden, c.norm_eps, s.xh + t * hidden);
    inverse_rms(s.xh, n, hidden, c.norm_eps, s.xh_inv_rms);
    project(model, s, s.xh, s.xh_inv_rms, n, wide, lr.w_gate_in_norm, lw.w_gate, s.gate, ffn);
    project(model, s, s.xh, s.xh_inv_rms, n, wide, lr.w_up_in_norm, lw.w_up, s.up, ffn);
  } else {
    normalize_and_quantize(s, s.x, hidden, n, hidden, wide, norm_kind(c, lr.ffn_norm), lr.ffn_norm, c.norm_eps);
    const QuantizedActivations fa = activations(s, n, hidden, wide);
    const TernaryMatmulOutput gate_up[] = {{&lw.w_gate, s.gate, ffn}, {&lw.w_up, s.up, ffn}};
    ternary_matmul_fused(gate_up, 2, fa, pool);
  }
  // Separate loops, not one with a branch inside, so the relu² one vectorizes (with
  // -fno-trapping-math, see CMakeLists.txt); as one scalar loop it was ~3 % of a 2B-4T token.
  if (c.activation == Activation::Relu2) {
    for (size_t i = 0; i < n * ffn; ++i) {
      const float g = s.gate[i];
      s.gate[i] = (g > 0.0f ? g * g : 0.0f) * s.up[i];
    }
  } else if (c.activation == Activation::GeluTanh) {
    gelu_tanh_gate(s.gate, s.up, n * ffn);
  } else if (traits.projection_norms) {  // the embedding families: no libm call per element
    silu_gate(s.gate, s.up, n * ffn);
  } else {
    for (size_t i = 0; i < n * ffn; ++i) s.gate[i] = silu(s.gate[i]) * s.up[i];
  }
  normalize_and_quantize(s, s.gate, ffn, n, ffn, wide, norm_kind(c, lr.ffn_sub_norm), lr.ffn_sub_norm, c.norm_eps);
  ternary_matmul(lw.w_down, activations(s, n, ffn, wide), s.proj, hidden, pool);
  if (traits.post_norms) norm_rows(s.proj, n, hidden, hidden, lr.post_ffn_norm, c.norm_eps);
  for (size_t i = 0; i < n * hidden; ++i) s.x[i] += s.proj[i];
}

// A sequence's checks before it runs (the messages forward() has always given).
Error check_sequence(const Model& model, const ForwardScratch& shared, const ForwardSequence& q, size_t count) {
  const ModelConfig& c = model.config();
  const KvCache& kv = *q.kv;
  const ForwardScratch& own = *q.own;
  TERN_CHECK_OR_RETURN(q.n > 0 && q.n <= shared.batch, Error::InvalidArgument, "forward of %u tokens (batch %u)", q.n,
                       shared.batch);
  TERN_CHECK_OR_RETURN(own.scores_per_head >= kv.attention_scores_per_head(c.heads / c.kv_heads),
                       Error::InvalidArgument,
                       "forward scratch holds %zu attention scores per KV head, the cache needs %zu",
                       own.scores_per_head, kv.attention_scores_per_head(c.heads / c.kv_heads));
  TERN_CHECK_OR_RETURN(static_cast<uint64_t>(q.pos0) + q.n <= UINT32_MAX, Error::ContextFull, "position %u overflows",
                       q.pos0);
  if (!kv.evicting()) {
    TERN_CHECK_OR_RETURN(q.pos0 + q.n <= kv.capacity_tokens(), Error::ContextFull,
                         "positions %u..%u exceed the KV cache's %u%s", q.pos0, q.pos0 + q.n - 1, kv.capacity_tokens(),
                         kv.compressed() != nullptr ? " (eviction off)" : "");
  }
  // Attention from a later first position (packed texts, sliding windows) reads the dense
  // cache in place; the compressed cache keeps no such order.
  const bool partial_attention = shared.segment_start != nullptr || c.sliding_layers != 0;
  TERN_CHECK_OR_RETURN(!partial_attention || kv.compressed() == nullptr, Error::NotSupported,
                       "sliding-window layers and packed texts need a dense KV cache (kv mode f32 or fp16)");
  TERN_CHECK_OR_RETURN(count == 1 || (shared.segment_start == nullptr && shared.observer == nullptr),
                       Error::InvalidArgument, "packed texts and attention observers run one sequence at a time");
  TERN_CHECK_OR_RETURN((!q.want_logits && q.row_logits == nullptr) || own.logits != nullptr, Error::NotSupported,
                       "an embedding model has no logits");
  for (uint32_t t = 0; t < q.n; ++t) {
    TERN_CHECK_OR_RETURN(q.tokens[t] >= 0 && static_cast<uint32_t>(q.tokens[t]) < c.vocab, Error::InvalidToken,
                         "token %d outside the vocabulary of %u", q.tokens[t], c.vocab);
    TERN_CHECK_OR_RETURN(shared.segment_start == nullptr || shared.segment_start[t] <= q.pos0 + t,
                         Error::InvalidArgument, "token %u's text starts after it (%u > %u)", t,
                         shared.segment_start[t], q.pos0 + t);
  }
  return Error::Ok;
}

// The logits of every sequence that wants them, from its last row (or from every row): all
// those rows' final norms, then one lm_head pass for them (dense_gemv_i8_tokens reads the
// matrix once).
void sequence_logits(const Model& model, ForwardScratch& s, const ForwardSequence* seqs, size_t count,
                     const Widths& d) {
  const ModelConfig& c = model.config();
  constexpr size_t kMaxAtOnce = 16;  // output pointers on the stack; more rows take several passes
  float* outputs[kMaxAtOnce];
  size_t rows = 0;
  auto flush = [&] {
    if (rows > 0) dense_gemv_i8_tokens(model.weights().lm_head, s.xn, d.wide, rows, outputs, s.head_work, model.pool());
    rows = 0;
  };
  auto add = [&](size_t row, float* out) {
    rms_norm(s.x + row * c.hidden, model.final_norm(), c.hidden, c.norm_eps, s.xn + rows * d.wide);
    outputs[rows++] = out;
    if (rows == kMaxAtOnce) flush();
  };
  for (size_t i = 0; i < count; ++i) {
    const ForwardSequence& q = seqs[i];
    if (q.status != Error::Ok) continue;
    if (q.row_logits != nullptr) {
      for (uint32_t r = 0; r < q.n; ++r) add(q.row + r, q.row_logits + static_cast<size_t>(r) * c.vocab);
    } else if (q.want_logits) {
      add(q.row + q.n - 1, q.own->logits);
    }
  }
  flush();
}

}  // namespace

Error forward_sequences(const Model& model, ForwardScratch& s, ForwardSequence* seqs, size_t count) {
  const ModelConfig& c = model.config();
  uint32_t n = 0;
  size_t running = 0;
  for (size_t i = 0; i < count; ++i) {
    ForwardSequence& q = seqs[i];
    set_status(q, check_sequence(model, s, q, count));
    if (q.status != Error::Ok) continue;
    TERN_CHECK_OR_RETURN(n + q.n <= s.batch, Error::InvalidArgument, "forward of %u tokens (batch %u)", n + q.n,
                         s.batch);
    q.row = n;
    n += q.n;
    ++running;
  }
  if (running == 0) return Error::Ok;
  const bool partial_attention = s.segment_start != nullptr || c.sliding_layers != 0;
  const Widths d = widths_of(c);
  for (size_t i = 0; i < count; ++i) {
    if (seqs[i].status == Error::Ok) embed_tokens(model, s, seqs[i].tokens, rows_of(seqs[i]));
  }
  for (uint32_t l = 0; l < c.layers; ++l) {
    attention_block(model, s, l, seqs, count, n, partial_attention, d);
    bool any = false;
    for (size_t i = 0; i < count; ++i) any = any || seqs[i].status == Error::Ok;
    if (!any) return Error::Ok;
    ffn_block(model, s, l, n, d);
  }
  sequence_logits(model, s, seqs, count, d);
  return Error::Ok;
}

Error forward(const Model& model, KvCache& kv, ForwardScratch& scratch, const int32_t* tokens, uint32_t n,
              uint32_t pos0, bool want_logits, const std::atomic<int>* abort) {
  ForwardSequence q;
  q.kv = &kv;
  q.own = &scratch;
  q.tokens = tokens;
  q.n = n;
  q.pos0 = pos0;
  q.want_logits = want_logits;
  q.abort = abort;
  TERN_RETURN_IF_ERROR(forward_sequences(model, scratch, &q, 1));
  return q.status == Error::Ok ? Error::Ok : fail(q.status, "%s", q.message);
}

}  // namespace tern
