#include "runtime/forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/dense_attention.h"
#include "runtime/kv_compressed_cache.h"
#include "runtime/model.h"

namespace tern {

namespace {

constexpr size_t kScratchAlignment = 64;

class Carver {
 public:
  Carver(ArenaAllocator* arena, size_t* bytes) : arena_(arena), bytes_(bytes) {}
  template <typename T>
  Error take(T** out, size_t count) {
    const size_t n = count == 0 ? 1 : count;
    if (arena_ == nullptr) {
      *bytes_ += align_up(n * sizeof(T), kScratchAlignment) + kScratchAlignment;
      *out = nullptr;
      return Error::Ok;
    }
    TERN_ASSIGN_OR_RETURN(*out, arena_->allocate_array<T>(n, ArenaPurpose::Scratch, kScratchAlignment));
    return Error::Ok;
  }

 private:
  ArenaAllocator* arena_;
  size_t* bytes_;
};

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

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

// How the input of a ternary linear is normalized before it is quantized.
enum class NormKind { None, Weighted, ParameterFree };

// Normalizes n rows of `cols` (row stride `in_stride`) into s.xn (stride `wide`) and quantizes them.
void normalize_and_quantize(ForwardScratch& s, const float* in, size_t in_stride, uint32_t n, size_t cols,
                            size_t wide, NormKind kind, const float* weight, float eps) {
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

NormKind norm_kind(const ModelConfig& c, const float* weight) {
  if (!family_traits(c.family)->layer_norms) return NormKind::ParameterFree;
  return weight != nullptr ? NormKind::Weighted : NormKind::None;
}

bool aborted(const std::atomic<int>* abort) { return abort != nullptr && abort->load(std::memory_order_relaxed) != 0; }

}  // namespace

void rms_norm(const float* x, const float* weight, size_t n, float eps, float* out) {
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) sum += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
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

void rope_angles(const float* inv_freq, size_t half, uint32_t pos, float* cos, float* sin) {
  for (size_t i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[i];
    cos[i] = std::cos(angle);
    sin[i] = std::sin(angle);
  }
}

void rope_rotate_half(float* head, size_t head_dim, const float* cos, const float* sin) {
  const size_t half = head_dim / 2;
  for (size_t i = 0; i < half; ++i) {
    const float a = head[i], b = head[i + half];
    head[i] = a * cos[i] - b * sin[i];
    head[i + half] = b * cos[i] + a * sin[i];
  }
}

void rope_adjacent_pairs(float* head, size_t head_dim, const float* cos, const float* sin) {
  for (size_t i = 0; i < head_dim / 2; ++i) {
    const float a = head[2 * i], b = head[2 * i + 1];
    head[2 * i] = a * cos[i] - b * sin[i];
    head[2 * i + 1] = a * sin[i] + b * cos[i];
  }
}

Error carve_forward_scratch(const ModelConfig& c, uint32_t batch, uint32_t context, ArenaAllocator* arena,
                            ForwardScratch* s, size_t* bytes) {
  return carve_forward_scratch(c, batch, context, AttentionScratch::ReadBack, arena, s, bytes);
}

Error carve_forward_scratch(const ModelConfig& c, uint32_t batch, uint32_t context, AttentionScratch kind,
                            ArenaAllocator* arena, ForwardScratch* s, size_t* bytes) {
  TERN_CHECK_OR_RETURN(batch > 0 && context > 0, Error::InvalidArgument, "scratch for batch %u, context %u", batch,
                       context);
  const size_t hidden = c.hidden, qd = static_cast<size_t>(c.heads) * c.head_dim;
  const size_t kvd = static_cast<size_t>(c.kv_heads) * c.head_dim, ffn = c.ffn_hidden;
  const size_t wide = std::max({hidden, qd, ffn});
  const size_t group = c.kv_heads == 0 ? 1 : c.heads / c.kv_heads;
  const bool read_back = kind == AttentionScratch::ReadBack;
  const bool all_scores = kind != AttentionScratch::AttendOnly;
  Carver carve(arena, bytes);
  s->batch = batch;
  s->context = context;
  s->kind = kind;
  s->scores_per_head = (all_scores ? group : std::min<size_t>(group, kKvMaxQueries)) * context;
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
  if (read_back) {
    TERN_RETURN_IF_ERROR(carve.take(&s->kv_rows, static_cast<size_t>(c.kv_heads) * 2 * context * c.head_dim));
  } else {
    s->kv_rows = nullptr;
  }
  TERN_RETURN_IF_ERROR(carve.take(&s->scores, static_cast<size_t>(c.kv_heads) * s->scores_per_head));
  TERN_RETURN_IF_ERROR(carve.take(&s->q_sinks, batch * qd));
  TERN_RETURN_IF_ERROR(carve.take(&s->sink_cos, c.head_dim / 2));
  TERN_RETURN_IF_ERROR(carve.take(&s->sink_sin, c.head_dim / 2));
  TERN_RETURN_IF_ERROR(carve.take(&s->logits, c.vocab));
  return Error::Ok;
}

namespace {

// Scores of keys stored as rows [0, len) for one query (a compressed cache read back), each
// key's dot product one running sum in column order like the dense kernels'.
void score_key_rows(const float* q, const float* keys, size_t hd, uint32_t len, float scale, float* sc) {
  for (uint32_t p = 0; p < len; ++p) {
    const float* k = keys + p * hd;
    float dot = 0.0f;
    for (size_t i = 0; i < hd; ++i) dot += q[i] * k[i];
    sc[p] = dot * scale;
  }
}

// Causal attention of n new tokens (positions pos0..) for one KV head and its query group.
void attend_kv_head(const ModelConfig& c, const KvCache& kv, ForwardScratch& s, uint32_t layer, uint32_t kv_head,
                    uint32_t n, uint32_t pos0) {
  const size_t hd = c.head_dim, group = c.heads / c.kv_heads;
  const size_t qd = static_cast<size_t>(c.heads) * hd;
  const uint32_t total = pos0 + n;
  // Dense caches are read in place (f16 widened as the kernels load it); the compressed one,
  // when not attended through attend(), is read back as rows into the scratch.
  const uint16_t* key_blocks_f16 = kv.key_blocks_f16(layer, kv_head);
  const uint16_t* values_f16 = kv.value_rows_f16(layer, kv_head);
  const float* key_blocks = nullptr;
  const float* values = nullptr;
  const float* key_rows = nullptr;
  if (key_blocks_f16 == nullptr) {
    float* k = s.kv_rows == nullptr ? nullptr : s.kv_rows + static_cast<size_t>(kv_head) * 2 * s.context * hd;
    float* v = k == nullptr ? nullptr : k + static_cast<size_t>(s.context) * hd;
    key_blocks = kv.key_blocks(layer, kv_head);
    values = kv.value_rows(layer, kv_head);
    if (key_blocks == nullptr) {
      kv.read_keys(layer, kv_head, 0, total, k);
      kv.read_values(layer, kv_head, 0, total, v);
      key_rows = k;
      values = v;
    }
  }
  float* scores = s.scores + static_cast<size_t>(kv_head) * s.scores_per_head;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const KvIsa isa = kv_best_isa();
  for (uint32_t t = 0; t < n; ++t) {
    const uint32_t len = pos0 + t + 1;
    const size_t first = t * qd + kv_head * group * hd;  // the group's query heads are adjacent
    if (key_blocks_f16 != nullptr) {
      dense_attention_scores_f16(isa, s.q + first, static_cast<uint32_t>(group), static_cast<uint32_t>(hd),
                                 key_blocks_f16, len, kv.capacity_tokens(), scale, scores, s.context);
    } else if (key_blocks != nullptr) {
      dense_attention_scores(isa, s.q + first, static_cast<uint32_t>(group), static_cast<uint32_t>(hd), key_blocks,
                             len, kv.capacity_tokens(), scale, scores, s.context);
    } else {
      for (size_t g = 0; g < group; ++g) score_key_rows(s.q + first + g * hd, key_rows, hd, len, scale, scores + g * s.context);
    }
    for (size_t g = 0; g < group; ++g) {
      float* sc = scores + g * s.context;
      float max_score = -INFINITY;
      for (uint32_t p = 0; p < len; ++p) max_score = std::max(max_score, sc[p]);
      float sum = 0.0f;
      for (uint32_t p = 0; p < len; ++p) {
        sc[p] = std::exp(sc[p] - max_score);
        sum += sc[p];
      }
      const float inv = 1.0f / sum;
      for (uint32_t p = 0; p < len; ++p) sc[p] *= inv;
      if (s.observer != nullptr && s.observer->on_probs != nullptr) {
        s.observer->on_probs(s.observer->user, layer, static_cast<uint32_t>(kv_head * group + g), pos0 + t, sc, len);
      }
    }
    if (values_f16 != nullptr) {
      dense_attention_values_f16(isa, scores, s.context, static_cast<uint32_t>(group), values_f16,
                                 static_cast<uint32_t>(hd), len, s.att + first);
    } else {
      dense_attention_values(isa, scores, s.context, static_cast<uint32_t>(group), values, static_cast<uint32_t>(hd),
                             len, s.att + first);
    }
  }
}

// The same through CompressedKvCache::attend(): the group's query heads read the quantized
// blocks in place. q_sinks (or null) scores the sink tokens (see reposition_sinks).
void attend_compressed(const ModelConfig& c, const CompressedKvCache& kv, ForwardScratch& s, uint32_t layer,
                       uint32_t kv_head, uint32_t n, uint32_t pos0, bool sinks_moved) {
  const size_t hd = c.head_dim, group = c.heads / c.kv_heads;
  const size_t qd = static_cast<size_t>(c.heads) * hd;
  float* scores = s.scores + static_cast<size_t>(kv_head) * s.scores_per_head;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (uint32_t t = 0; t < n; ++t) {
    const size_t first = t * qd + kv_head * group * hd;
    kv.attend(layer, kv_head, s.q + first, sinks_moved ? s.q_sinks + first : nullptr, static_cast<uint32_t>(group),
              pos0 + t + 1, scale, scores, s.att + first);
  }
}

}  // namespace

Error forward(const Model& model, KvCache& kv, ForwardScratch& s, const int32_t* tokens, uint32_t n, uint32_t pos0,
              bool want_logits, const std::atomic<int>* abort) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  TERN_CHECK_OR_RETURN(n > 0 && n <= s.batch, Error::InvalidArgument, "forward of %u tokens (batch %u)", n,
                       s.batch);
  CompressedKvCache* ckv = kv.compressed();
  // attend() for a compressed cache when the scratch holds its scores; read back otherwise
  // (and when asked to, or to report probabilities to an observer).
  const bool want_probs = s.observer != nullptr && s.observer->on_probs != nullptr;
  const size_t group = c.heads / c.kv_heads;
  const bool scores_fit =
      s.scores_per_head >= std::min<size_t>(group, kKvMaxQueries) * static_cast<size_t>(kv.capacity_tokens());
  const bool use_attend = ckv != nullptr && scores_fit && !((s.read_back || want_probs) && s.kv_rows != nullptr);
  TERN_CHECK_OR_RETURN(static_cast<uint64_t>(pos0) + n <= UINT32_MAX, Error::ContextFull, "position %u overflows",
                       pos0);
  if (!use_attend) {
    // Dense caches are read in place; a compressed one read back needs the scratch rows.
    const bool dense = kv.key_blocks(0, 0) != nullptr || kv.key_blocks_f16(0, 0) != nullptr;
    TERN_CHECK_OR_RETURN(dense || s.kv_rows != nullptr, Error::InvalidArgument,
                         "attention scratch has no rows to read the cache back into");
    TERN_CHECK_OR_RETURN(pos0 + n <= s.context && pos0 + n <= kv.capacity_tokens(), Error::ContextFull,
                         "positions %u..%u exceed the context of %u", pos0, pos0 + n - 1,
                         std::min(s.context, kv.capacity_tokens()));
  } else if (ckv->profile().eviction == KvEviction::None) {
    TERN_CHECK_OR_RETURN(pos0 + n <= kv.capacity_tokens(), Error::ContextFull,
                         "positions %u..%u exceed the KV cache's %u (eviction off)", pos0, pos0 + n - 1,
                         kv.capacity_tokens());
  }
  for (uint32_t t = 0; t < n; ++t) {
    TERN_CHECK_OR_RETURN(tokens[t] >= 0 && static_cast<uint32_t>(tokens[t]) < c.vocab, Error::InvalidToken,
                         "token %d outside the vocabulary of %u", tokens[t], c.vocab);
  }
  const ThreadPool* pool = model.pool();
  const size_t hidden = c.hidden, hd = c.head_dim, half = hd / 2;
  const size_t qd = static_cast<size_t>(c.heads) * hd, kvd = static_cast<size_t>(c.kv_heads) * hd;
  const size_t ffn = c.ffn_hidden;
  const size_t wide = std::max({hidden, qd, ffn});
  const bool adjacent = c.rope_style == RopeStyle::AdjacentPairs;

  for (uint32_t t = 0; t < n; ++t) {
    dense_row_f32(w.tok_embeddings, static_cast<size_t>(tokens[t]), s.x + t * hidden);
    rope_angles(model.rope_inv_freq(), half, pos0 + t, s.rope_cos + t * half, s.rope_sin + t * half);
  }

  for (uint32_t l = 0; l < c.layers; ++l) {
    if (aborted(abort)) return fail(Error::Aborted, "aborted at layer %u", l);
    const LayerWeights& lw = model.layer(l);
    const LayerRuntime& lr = model.layer_runtime(l);

    // Attention block.
    normalize_and_quantize(s, s.x, hidden, n, hidden, wide, norm_kind(c, lr.attn_norm), lr.attn_norm, c.norm_eps);
    const QuantizedActivations xa = activations(s, n, hidden, wide);
    const TernaryMatmulOutput qkv[] = {{&lw.wq, s.q, qd}, {&lw.wk, s.k, kvd}, {&lw.wv, s.v, kvd}};
    ternary_matmul_fused(qkv, 3, xa, pool);
    for (uint32_t t = 0; t < n; ++t) {
      const float* cs = s.rope_cos + t * half;
      const float* sn = s.rope_sin + t * half;
      for (uint32_t h = 0; h < c.heads; ++h) {
        float* head = s.q + t * qd + h * hd;
        adjacent ? rope_adjacent_pairs(head, hd, cs, sn) : rope_rotate_half(head, hd, cs, sn);
      }
      for (uint32_t h = 0; h < c.kv_heads; ++h) {
        float* head = s.k + t * kvd + h * hd;
        adjacent ? rope_adjacent_pairs(head, hd, cs, sn) : rope_rotate_half(head, hd, cs, sn);
        kv.write(l, h, pos0 + t, head, s.v + t * kvd + h * hd);
      }
    }
    bool sinks_moved = false;
    if (ckv != nullptr) {
      if (const Error e = ckv->write_error(); e != Error::Ok) return e;
      // StreamingLLM's "positions within the cache": after E non-sink positions were
      // dropped, the query at position p scores the sinks as if it stood at p - E. Keys
      // are cached after RoPE at their original positions, so rotating the (already
      // rotated) query by -E positions gives exactly that; every other kept key keeps its
      // true distance p - j, which the eviction bounds by the capacity.
      const uint32_t evicted = use_attend && s.reposition_sinks ? ckv->evicted_positions(l, 0) : 0;
      if (evicted > 0) {
        sinks_moved = true;
        rope_angles(model.rope_inv_freq(), half, evicted, s.sink_cos, s.sink_sin);
        for (size_t i = 0; i < half; ++i) s.sink_sin[i] = -s.sink_sin[i];
        std::memcpy(s.q_sinks, s.q, static_cast<size_t>(n) * qd * sizeof(float));
        for (size_t h = 0; h < static_cast<size_t>(n) * c.heads; ++h) {
          float* head = s.q_sinks + h * hd;
          adjacent ? rope_adjacent_pairs(head, hd, s.sink_cos, s.sink_sin)
                   : rope_rotate_half(head, hd, s.sink_cos, s.sink_sin);
        }
      }
    }
    auto attend = [&](size_t kv_head) {
      if (use_attend) {
        attend_compressed(c, *ckv, s, l, static_cast<uint32_t>(kv_head), n, pos0, sinks_moved);
      } else {
        attend_kv_head(c, kv, s, l, static_cast<uint32_t>(kv_head), n, pos0);
      }
    };
    // Short attention is cheaper than waking the workers (each head computes the same
    // either way, so the threshold never changes results).
    const size_t attended = std::min<size_t>(pos0 + n, kv.capacity_tokens());
    const size_t attention_macs = static_cast<size_t>(n) * attended * qd * 2;
    if (pool != nullptr && attention_macs >= (size_t{1} << 20) && s.observer == nullptr) {
      pool->parallel_for(c.kv_heads, attend);
    } else {
      for (uint32_t h = 0; h < c.kv_heads; ++h) attend(h);
    }
    if (s.observer != nullptr && s.observer->on_output != nullptr) {
      s.observer->on_output(s.observer->user, l, pos0, n, s.att);
    }
    normalize_and_quantize(s, s.att, qd, n, qd, wide, norm_kind(c, lr.attn_sub_norm), lr.attn_sub_norm, c.norm_eps);
    ternary_matmul(lw.wo, activations(s, n, qd, wide), s.proj, hidden, pool);
    for (size_t i = 0; i < n * hidden; ++i) s.x[i] += s.proj[i];

    // Feed-forward block.
    normalize_and_quantize(s, s.x, hidden, n, hidden, wide, norm_kind(c, lr.ffn_norm), lr.ffn_norm, c.norm_eps);
    const QuantizedActivations fa = activations(s, n, hidden, wide);
    const TernaryMatmulOutput gate_up[] = {{&lw.w_gate, s.gate, ffn}, {&lw.w_up, s.up, ffn}};
    ternary_matmul_fused(gate_up, 2, fa, pool);
    // Two loops, not one with a branch inside, so the relu² one vectorizes (with
    // -fno-trapping-math, see CMakeLists.txt); as one scalar loop it was ~3 % of a 2B-4T token.
    if (c.activation == Activation::Relu2) {
      for (size_t i = 0; i < n * ffn; ++i) {
        const float g = s.gate[i];
        s.gate[i] = (g > 0.0f ? g * g : 0.0f) * s.up[i];
      }
    } else {
      for (size_t i = 0; i < n * ffn; ++i) s.gate[i] = silu(s.gate[i]) * s.up[i];
    }
    normalize_and_quantize(s, s.gate, ffn, n, ffn, wide, norm_kind(c, lr.ffn_sub_norm), lr.ffn_sub_norm, c.norm_eps);
    ternary_matmul(lw.w_down, activations(s, n, ffn, wide), s.proj, hidden, pool);
    for (size_t i = 0; i < n * hidden; ++i) s.x[i] += s.proj[i];
  }

  if (want_logits) {
    float* last = s.x + static_cast<size_t>(n - 1) * hidden;
    rms_norm(last, model.final_norm(), hidden, c.norm_eps, s.xn);
    dense_gemv_i8(w.lm_head, s.xn, s.logits, pool);  // f32 unless the lm_head is q8/q4
  }
  return Error::Ok;
}

}  // namespace tern
