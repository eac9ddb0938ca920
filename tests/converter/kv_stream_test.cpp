// tern-eval --stream's library path (kvq::run_stream) against plain Sessions: within the
// capacity its exact streams score the text exactly as a dense-cache Session does; past it,
// its same-eviction exact stream scores it as a Session with an evicting exact cache of the
// same capacity does; its position bookkeeping (exact / compressed / evicted) follows the
// cache's block rule; and its summaries agree with the per-position records they summarize.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "converter/calibration/kv_quality.h"
#include "runtime/engine/model.h"
#include "runtime/engine/session.h"
#include "tests/support/bundle_util.h"

namespace tern {
namespace {

constexpr const char* kBundle = "tiny-austen-packed.tern";

std::vector<int32_t> held_out_ids(Model& model, size_t count) {
  // The end of the SOTU corpus: held out from tiny-austen's training.
  const std::vector<uint8_t> bytes = testing::read_file_bytes(testing::sotu_held_out_text());
  EXPECT_FALSE(bytes.empty()) << testing::sotu_held_out_text();
  std::string text(bytes.begin(), bytes.end());
  auto ids = kvq::tokenize_text(model, text, false, 12000);
  EXPECT_TRUE(ids.ok()) << last_error_message();
  if (!ids.ok()) return {};
  EXPECT_GE(ids->size(), count);
  ids->resize(std::min(count, ids->size()));
  return *ids;
}

// Perplexity of `ids` through a Session: decode token by token, log-softmax of its logits.
double session_ppl(const char* bundle, const ModelParams& params, const std::vector<int32_t>& ids) {
  auto model = Model::load(bundle, params);
  EXPECT_TRUE(model.ok()) << last_error_message();
  if (!model.ok()) return 0;
  auto session = (*model)->create_session(SamplerParams{});
  EXPECT_TRUE(session.ok()) << last_error_message();
  if (!session.ok()) return 0;
  const uint32_t vocab = (*model)->config().vocab;
  double nll = 0;
  for (size_t pos = 0; pos + 1 < ids.size(); ++pos) {
    EXPECT_EQ((*session)->decode(ids[pos]), Error::Ok) << last_error_message();
    const float* logits = (*session)->logits();
    const double mx = *std::max_element(logits, logits + vocab);
    double sum = 0;
    for (uint32_t v = 0; v < vocab; ++v) sum += std::exp(double(logits[v]) - mx);
    nll += mx + std::log(sum) - logits[ids[pos + 1]];
  }
  (*model)->destroy_session(*session);
  return std::exp(nll / static_cast<double>(ids.size() - 1));
}

double trace_ppl(const kvq::StreamTrace& t) {
  double s = 0;
  for (float x : t.nll) s += x;
  return std::exp(s / static_cast<double>(t.nll.size()));
}

std::vector<kvq::KvMode> stream_modes(const Model& model) {
  const ModelConfig& c = model.config();
  kvq::KvSettings exact;
  exact.exact_type = KvType::F32;
  std::vector<kvq::KvMode> modes;
  modes.push_back(
      kvq::compressed_mode("f32", c, exact, std::vector<KvHeadBits>(size_t{c.layers} * c.kv_heads, KvHeadBits{0, 0})));
  auto q4 = kvq::mode_by_name(model, "q4", kvq::KvSettings{});
  EXPECT_TRUE(q4.ok());
  modes.push_back(std::move(q4).value());
  return modes;
}

// Every test streams the bundle's model.
class KvStream : public ::testing::Test {
 protected:
  void SetUp() override {
    TERN_REQUIRE_BUNDLE(kBundle);
    auto loaded = Model::load(path_.c_str(), ModelParams{});
    ASSERT_TRUE(loaded.ok()) << last_error_message();
    model_ = std::move(loaded).value();
  }
  const std::string path_ = testing::bundle_path(kBundle);
  std::unique_ptr<Model> model_;
};

TEST_F(KvStream, WithinTheCapacityEveryExactStreamIsAPlainSession) {
  const std::vector<int32_t> ids = held_out_ids(*model_, 300);
  ASSERT_EQ(ids.size(), 300u);
  std::vector<kvq::KvMode> modes = stream_modes(*model_);
  auto r = kvq::run_stream(*model_, modes, ids, kvq::StreamOptions{});
  ASSERT_TRUE(r.ok()) << last_error_message();

  // The streams' exact caches are compressed caches of exact f32 heads (they must evict
  // past the capacity), as a Session gets with kv_mode "f32" and eviction on.
  ModelParams exact;
  exact.kv_mode = "f32";
  exact.kv_eviction = 1;
  const double expected = session_ppl(path_.c_str(), exact, ids);
  EXPECT_GT(expected, 1.5);
  EXPECT_LT(expected, model_->config().vocab / 4.0);
  EXPECT_EQ(r->full.capacity, model_->config().max_context) << "the full-context stream holds the whole context";
  ASSERT_EQ(r->full.nll.size(), ids.size() - 1);
  EXPECT_NEAR(trace_ppl(r->full), expected, 1e-5 * expected);
  ASSERT_EQ(r->same.size(), 1u) << "f32 and q4 share one layout";
  EXPECT_NEAR(trace_ppl(r->same[0]), expected, 1e-5 * expected);
  EXPECT_NEAR(trace_ppl(r->modes[0]), expected, 1e-5 * expected);
  // A dense f32 Session attends in another order; the model's int8 activation quantization
  // amplifies the rounding differences (0.1 % of PPL here), so only close.
  ModelParams dense;
  dense.kv_mode = "f32";
  const double dense_ppl = session_ppl(path_.c_str(), dense, ids);
  EXPECT_NEAR(trace_ppl(r->full), dense_ppl, 5e-3 * dense_ppl);
  // Nothing evicted; the exact mode keeps everything exact, q4 quantizes all but S + W..W+G.
  const size_t last = ids.size() - 2;
  EXPECT_EQ(r->modes[0].evicted_fraction[last], 0.0f);
  EXPECT_EQ(r->modes[0].exact_fraction[last], 1.0f);
  EXPECT_EQ(r->modes[1].evicted_fraction[last], 0.0f);
  const uint32_t next = static_cast<uint32_t>(ids.size() - 1), n = next - 4;
  const uint32_t window = 32 + (n - 64 - 1) % 32 + 1;
  EXPECT_FLOAT_EQ(r->modes[1].exact_fraction[last], float(4 + window) / float(next));
  EXPECT_FLOAT_EQ(r->modes[1].compressed_fraction[last], 1.0f - float(4 + window) / float(next));
  // q4 against the exact stream: close, not identical.
  const kvq::StreamSummary s = kvq::summarize(r->modes[1], r->same[0], 0, ids.size() - 1, false);
  EXPECT_GT(s.mean_kl, 0.0);
  EXPECT_LT(std::fabs(s.delta_ppl_percent), 1.0);
  EXPECT_NEAR(s.delta_ppl_percent, 100.0 * (trace_ppl(r->modes[1]) / trace_ppl(r->same[0]) - 1.0), 1e-6);
  EXPECT_GT(s.delta_ppl_se_percent, 0.0);
}

TEST_F(KvStream, PastTheCapacityTheSameEvictionStreamIsAnEvictingSession) {
  const std::vector<int32_t> ids = held_out_ids(*model_, 900);
  ASSERT_EQ(ids.size(), 900u);
  std::vector<kvq::KvMode> modes = stream_modes(*model_);
  kvq::StreamOptions opt;
  opt.capacity = 250;  // the ladder below it: S + W + G + 5 G = 228
  opt.threads = 2;
  auto r = kvq::run_stream(*model_, modes, ids, opt);
  ASSERT_TRUE(r.ok()) << last_error_message();
  ASSERT_EQ(r->same.size(), 1u);
  EXPECT_EQ(r->same[0].capacity, 228u);
  EXPECT_EQ(r->modes[1].capacity, 228u);

  ModelParams evicting;
  evicting.kv_mode = "f32";
  evicting.kv_eviction = 1;
  evicting.context_tokens = 228;
  const double expected = session_ppl(path_.c_str(), evicting, ids);
  EXPECT_NEAR(trace_ppl(r->same[0]), expected, 1e-5 * expected);
  EXPECT_NEAR(trace_ppl(r->modes[0]), expected, 1e-5 * expected);
  // Eviction drops whole middle blocks: what is kept never exceeds the capacity and is
  // within one block of it once eviction started.
  for (const kvq::StreamTrace& t : r->modes) {
    for (size_t p = 0; p < t.evicted_fraction.size(); ++p) {
      const double next = double(p + 1), evicted = t.evicted_fraction[p] * next;
      EXPECT_NEAR(evicted, 32.0 * std::round(evicted / 32.0), 1e-2) << t.name << " at " << p;
      EXPECT_LE(next - evicted, 228.0 + 1e-2) << t.name << " at " << p;
      if (evicted > 0) {
        EXPECT_GT(next - evicted, 228.0 - 32.0 - 1e-2) << t.name << " at " << p;
      }
    }
    EXPECT_GT(t.evicted_fraction.back(), 0.7f);
  }
  // The full-context stream differs from the 228-position one once eviction starts.
  EXPECT_NE(trace_ppl(r->full), trace_ppl(r->same[0]));
  // Segments partition the stream: their NLLs add up to the whole.
  const size_t n = ids.size() - 1;
  double whole = std::log(kvq::summarize(r->modes[1], r->full, 0, n, true).ppl) * double(n), parts = 0;
  for (size_t b = 0; b < n; b += 256) {
    const kvq::StreamSummary s = kvq::summarize(r->modes[1], r->full, b, b + 256, true);
    parts += std::log(s.ppl) * double(s.end - s.begin);
  }
  EXPECT_NEAR(parts, whole, 1e-6 * whole);
}

TEST_F(KvStream, BudgetPicksTheLargestCacheThatFits) {
  const std::vector<int32_t> ids = held_out_ids(*model_, 40);
  std::vector<kvq::KvMode> modes = stream_modes(*model_);
  kvq::StreamOptions opt;
  opt.budget_bytes = 400000;
  auto r = kvq::run_stream(*model_, modes, ids, opt);
  ASSERT_TRUE(r.ok()) << last_error_message();
  for (size_t i = 0; i < modes.size(); ++i) {
    const KvCacheSpec& spec = modes[i].resolved();
    const uint32_t cap = r->modes[i].capacity;
    EXPECT_LE(kv_cache_arena_bytes(spec, cap), opt.budget_bytes) << modes[i].name;
    EXPECT_EQ(r->modes[i].cache_bytes, kv_cache_arena_bytes(spec, cap));
    // One more block would not fit (or pass the model's context).
    const uint32_t bigger = cap + spec.profile.block_tokens;
    EXPECT_TRUE(kv_cache_arena_bytes(spec, bigger) > opt.budget_bytes || bigger > model_->config().max_context)
        << modes[i].name;
  }
  EXPECT_GT(r->modes[1].capacity, r->modes[0].capacity) << "q4 holds more positions than exact rows in 400 kB";
  opt.budget_bytes = 1000;
  EXPECT_EQ(kvq::run_stream(*model_, modes, ids, opt).error(), Error::InvalidArgument);
}

}  // namespace
}  // namespace tern
