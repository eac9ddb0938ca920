// The forward pass of the 2B-4T and LLaMA-BitNet families against a second, naive
// implementation written from the formulas (double precision, dequantized weights, the
// same int8 activation quantization), on small random models: GQA, sub-norms present or
// absent, relu² or SiLU, prefill batches vs decode.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/ternary_layout.h"
#include "runtime/engine/model.h"
#include "runtime/engine/session.h"

namespace tern {
namespace {

struct RandomModel {
  ModelConfig c;
  std::vector<float> embed, final_norm;
  struct Layer {
    std::vector<float> attn_norm, attn_sub, ffn_norm, ffn_sub;
    std::vector<int8_t> codes[7];
    float scale[7];
    std::vector<uint8_t> packed[7];
  };
  std::vector<Layer> layers;
  std::vector<LayerWeights> views;
  ModelWeights weights;
};

enum Slot { Q, K, V, O, GATE, UP, DOWN };

std::unique_ptr<RandomModel> make_model(ModelFamily family, Activation act, bool sub_norms, uint32_t seed) {
  auto m = std::make_unique<RandomModel>();
  ModelConfig& c = m->c;
  c.family = family;
  c.hidden = 64;
  c.ffn_hidden = 96;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 16;
  c.vocab = 50;
  c.max_context = 64;
  c.rope_theta = 10000.0f;
  c.rope_style = RopeStyle::RotateHalf;
  c.activation = act;
  c.has_sub_norms = sub_norms;
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> code(-1, 1);
  auto vec = [&](size_t n, float base, float spread) {
    std::vector<float> v(n);
    for (float& x : v) x = base + spread * normal(rng);
    return v;
  };
  m->embed = vec(static_cast<size_t>(c.vocab) * c.hidden, 0.0f, 1.0f);
  m->final_norm = vec(c.hidden, 1.0f, 0.1f);
  const size_t qd = c.heads * c.head_dim, kvd = c.kv_heads * c.head_dim;
  const size_t shapes[7][2] = {{qd, c.hidden},          {kvd, c.hidden},          {kvd, c.hidden},
                               {c.hidden, qd},          {c.ffn_hidden, c.hidden}, {c.ffn_hidden, c.hidden},
                               {c.hidden, c.ffn_hidden}};
  m->layers.resize(c.layers);
  m->views.resize(c.layers);
  for (uint32_t l = 0; l < c.layers; ++l) {
    RandomModel::Layer& L = m->layers[l];
    L.attn_norm = vec(c.hidden, 1.0f, 0.1f);
    L.ffn_norm = vec(c.hidden, 1.0f, 0.1f);
    if (sub_norms) {
      L.attn_sub = vec(qd, 1.0f, 0.1f);
      L.ffn_sub = vec(c.ffn_hidden, 1.0f, 0.1f);
    }
    LayerWeights& v = m->views[l];
    TernaryMatrix* mats[7] = {&v.wq, &v.wk, &v.wv, &v.wo, &v.w_gate, &v.w_up, &v.w_down};
    for (int s = 0; s < 7; ++s) {
      const size_t rows = shapes[s][0], cols = shapes[s][1];
      L.codes[s].resize(rows * cols);
      for (auto& x : L.codes[s]) x = static_cast<int8_t>(code(rng));
      L.scale[s] = 0.5f / std::sqrt(static_cast<float>(cols)) * (1.0f + 0.1f * s);
      L.packed[s].resize(ternary_packed_size(TernaryLayout::T2RowMajor, rows, cols));
      EXPECT_EQ(ternary_pack(TernaryLayout::T2RowMajor, L.codes[s].data(), rows, cols, L.packed[s].data(),
                             L.packed[s].size()),
                Error::Ok);
      *mats[s] =
          TernaryMatrix{TernaryLayout::T2RowMajor, L.packed[s].data(), L.packed[s].size(), rows, cols, L.scale[s]};
    }
    v.attn_norm = VectorView{DenseType::F32, L.attn_norm.data(), L.attn_norm.size()};
    v.ffn_norm = VectorView{DenseType::F32, L.ffn_norm.data(), L.ffn_norm.size()};
    if (sub_norms) {
      v.attn_sub_norm = VectorView{DenseType::F32, L.attn_sub.data(), L.attn_sub.size()};
      v.ffn_sub_norm = VectorView{DenseType::F32, L.ffn_sub.data(), L.ffn_sub.size()};
    }
  }
  DenseMatrix e;
  e.type = DenseType::F32;
  e.data = m->embed.data();
  e.size_bytes = m->embed.size() * sizeof(float);
  e.rows = c.vocab;
  e.cols = c.hidden;
  m->weights.tok_embeddings = e;
  m->weights.lm_head = e;
  m->weights.final_norm = VectorView{DenseType::F32, m->final_norm.data(), m->final_norm.size()};
  m->weights.layers = m->views.data();
  return m;
}

// ---- the naive reference ----
using Vec = std::vector<double>;

Vec rms(const Vec& x, const std::vector<float>& w, double eps) {
  double s = 0;
  for (double v : x) s += v * v;
  const double inv = 1.0 / std::sqrt(s / x.size() + eps);
  Vec out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] * inv * (w.empty() ? 1.0 : w[i]);
  return out;
}

// BitLinear: int8 absmax activations (round half to even), dequantized ternary weights.
Vec bitlinear(const Vec& x, const std::vector<int8_t>& codes, float scale, size_t rows) {
  double amax = 0;
  for (double v : x) amax = std::max(amax, std::fabs(v));
  const double sx = amax / 127.0;
  Vec q(x.size());
  for (size_t i = 0; i < x.size(); ++i) q[i] = amax == 0 ? 0 : std::nearbyint(x[i] / sx);
  Vec y(rows);
  for (size_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (size_t c = 0; c < x.size(); ++c) acc += codes[r * x.size() + c] * q[c];
    y[r] = acc * sx * scale;
  }
  return y;
}

void rope(double* head, size_t hd, uint32_t pos, double theta) {
  for (size_t i = 0; i < hd / 2; ++i) {
    const double angle = pos * std::pow(theta, -2.0 * i / hd);
    const double a = head[i], b = head[i + hd / 2];
    head[i] = a * std::cos(angle) - b * std::sin(angle);
    head[i + hd / 2] = b * std::cos(angle) + a * std::sin(angle);
  }
}

std::vector<Vec> naive_logits(const RandomModel& m, const std::vector<int32_t>& tokens) {
  const ModelConfig& c = m.c;
  const size_t hd = c.head_dim, qd = c.heads * hd, kvd = c.kv_heads * hd, group = c.heads / c.kv_heads;
  std::vector<std::vector<Vec>> keys(c.layers), values(c.layers);
  std::vector<Vec> out;
  for (uint32_t pos = 0; pos < tokens.size(); ++pos) {
    Vec x(m.embed.begin() + tokens[pos] * c.hidden, m.embed.begin() + (tokens[pos] + 1) * c.hidden);
    for (uint32_t l = 0; l < c.layers; ++l) {
      const RandomModel::Layer& L = m.layers[l];
      const Vec h = rms(x, L.attn_norm, c.norm_eps);
      Vec q = bitlinear(h, L.codes[Q], L.scale[Q], qd);
      Vec k = bitlinear(h, L.codes[K], L.scale[K], kvd);
      const Vec v = bitlinear(h, L.codes[V], L.scale[V], kvd);
      for (size_t i = 0; i < c.heads; ++i) rope(&q[i * hd], hd, pos, c.rope_theta);
      for (size_t i = 0; i < c.kv_heads; ++i) rope(&k[i * hd], hd, pos, c.rope_theta);
      keys[l].push_back(k);
      values[l].push_back(v);
      Vec att(qd, 0.0);
      for (size_t head = 0; head < c.heads; ++head) {
        const size_t kvh = head / group;
        Vec w(pos + 1);
        double mx = -1e300;
        for (uint32_t p = 0; p <= pos; ++p) {
          double d = 0;
          for (size_t i = 0; i < hd; ++i) d += q[head * hd + i] * keys[l][p][kvh * hd + i];
          w[p] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, w[p]);
        }
        double sum = 0;
        for (double& e : w) sum += (e = std::exp(e - mx));
        for (uint32_t p = 0; p <= pos; ++p)
          for (size_t i = 0; i < hd; ++i) att[head * hd + i] += w[p] / sum * values[l][p][kvh * hd + i];
      }
      const Vec o =
          bitlinear(c.has_sub_norms ? rms(att, L.attn_sub, c.norm_eps) : att, L.codes[O], L.scale[O], c.hidden);
      for (size_t i = 0; i < c.hidden; ++i) x[i] += o[i];
      const Vec f = rms(x, L.ffn_norm, c.norm_eps);
      const Vec g = bitlinear(f, L.codes[GATE], L.scale[GATE], c.ffn_hidden);
      const Vec u = bitlinear(f, L.codes[UP], L.scale[UP], c.ffn_hidden);
      Vec a(c.ffn_hidden);
      for (size_t i = 0; i < a.size(); ++i) {
        const double act =
            c.activation == Activation::Relu2 ? (g[i] > 0 ? g[i] * g[i] : 0.0) : g[i] / (1.0 + std::exp(-g[i]));
        a[i] = act * u[i];
      }
      const Vec d =
          bitlinear(c.has_sub_norms ? rms(a, L.ffn_sub, c.norm_eps) : a, L.codes[DOWN], L.scale[DOWN], c.hidden);
      for (size_t i = 0; i < c.hidden; ++i) x[i] += d[i];
    }
    const Vec n = rms(x, m.final_norm, c.norm_eps);
    Vec logits(c.vocab, 0.0);
    for (size_t t = 0; t < c.vocab; ++t)
      for (size_t i = 0; i < c.hidden; ++i) logits[t] += m.embed[t * c.hidden + i] * n[i];
    out.push_back(logits);
  }
  return out;
}

struct Case {
  const char* name;
  ModelFamily family;
  Activation act;
  bool sub_norms;
};

class Families : public ::testing::TestWithParam<Case> {};

TEST_P(Families, DecodeAndPrefillMatchTheNaiveReference) {
  const Case& k = GetParam();
  auto m = make_model(k.family, k.act, k.sub_norms, 7);
  const std::vector<int32_t> tokens = {3, 17, 42, 8, 8, 29, 0, 49, 11};
  const std::vector<Vec> ref = naive_logits(*m, tokens);
  ModelParams params;
  params.batch_tokens = 4;
  auto model = Model::create(m->c, m->weights, params, 0);
  ASSERT_TRUE(model.ok()) << last_error_message();
  auto session = (*model)->create_session(SamplerParams{});
  ASSERT_TRUE(session.ok()) << last_error_message();
  double max_error = 0, max_logit = 0;
  for (size_t p = 0; p < tokens.size(); ++p) {
    ASSERT_EQ((*session)->decode(tokens[p]), Error::Ok) << last_error_message();
    for (size_t t = 0; t < m->c.vocab; ++t) {
      max_error = std::max(max_error, std::fabs((*session)->logits()[t] - ref[p][t]));
      max_logit = std::max(max_logit, std::fabs(ref[p][t]));
    }
  }
  // float vs double only; an int8 rounding flip would show as an error of ~1e-2.
  EXPECT_LT(max_error, 2e-3 * max_logit) << k.name << " max error " << max_error << " of logits up to " << max_logit;
  (*session)->reset();
  ASSERT_EQ((*session)->prefill(tokens.data(), tokens.size()), Error::Ok);  // batches of 4, 4, 1
  double prefill_error = 0;
  for (size_t t = 0; t < m->c.vocab; ++t) {
    prefill_error = std::max(prefill_error, std::fabs((*session)->logits()[t] - ref.back()[t]));
  }
  EXPECT_LT(prefill_error, 2e-3 * max_logit) << k.name;
}

INSTANTIATE_TEST_SUITE_P(All, Families,
                         ::testing::Values(Case{"bitnet_2b4t", ModelFamily::Bitnet2B4T, Activation::Relu2, true},
                                           Case{"llama_bitnet", ModelFamily::LlamaBitnet, Activation::Silu, false},
                                           Case{"llama_bitnet_sub_norms", ModelFamily::LlamaBitnet, Activation::Silu,
                                                true}),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(Families, MissingRequiredWeightsAreRejectedAtLoad) {
  auto m = make_model(ModelFamily::Bitnet2B4T, Activation::Relu2, true, 3);
  m->views[1].attn_sub_norm = VectorView{};
  auto model = Model::create(m->c, m->weights, ModelParams{}, 0);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.error(), Error::UnknownTensor);
  EXPECT_NE(std::string(last_error_message()).find("layers.1.attn_sub_norm"), std::string::npos);
  m = make_model(ModelFamily::Bitnet2B4T, Activation::Relu2, true, 3);
  m->views[0].wk.rows = 8;
  model = Model::create(m->c, m->weights, ModelParams{}, 0);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.error(), Error::ShapeMismatch);
}

}  // namespace
}  // namespace tern
