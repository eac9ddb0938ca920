// Calibration end to end on the real models (tern-convert --calibrate's library path):
// the profile round-trips through the bundle, every allocation meets its average exactly,
// sink heads stay exact, kv_profile_for_average picks the recorded allocation (and names
// the available ones when asked for another), the calibrated allocation is never worse
// than uniform at equal bytes on the calibration text (KL and greedy agreement), and tern-eval's exact perplexity
// equals one computed through a plain Session.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "converter/calibration/kv_calibrate.h"
#include "converter/calibration/kv_calibration_text.h"
#include "converter/calibration/kv_quality.h"
#include "converter/import/import.h"
#include "converter/writer/bundle_writer.h"
#include "runtime/engine/model.h"
#include "runtime/engine/session.h"
#include "runtime/kv/kv_profile.h"
#include "runtime/model/bundle.h"
#include "schema/bundle_generated.h"
#include "tests/support/test_util.h"

namespace tern {
namespace {

using convert::CalibrationOptions;

// Few positions keep the suite fast (quantization starts after S + W + G = 68 of them).
constexpr uint32_t kCalibTokens = 192;

struct Calibrated {
  std::unique_ptr<testing::TempFile> file;
  convert::CalibrationResult result;
  std::string error;
};

// Converts `source` (a path) into a calibrated bundle once per process.
const Calibrated& calibrated(const std::string& source, bool f32_embed) {
  static std::map<std::string, Calibrated> cache;
  auto found = cache.find(source);
  if (found != cache.end()) return found->second;
  Calibrated& c = cache[source];
  c.file = std::make_unique<testing::TempFile>(".tern");
  convert::ConvertOptions options;
  options.progress = false;
  if (f32_embed) options.embed_type = DenseType::F32;
  auto ir = convert::import_model(source, options);
  if (!ir.ok()) return c.error = last_error_message(), c;
  convert::BundleContents contents = convert::contents_from_ir(*ir, options);
  if (!convert::write_bundle(c.file->path(), contents).ok()) return c.error = last_error_message(), c;
  CalibrationOptions calib;
  calib.tokens = kCalibTokens;
  calib.threads = 2;  // lanes in parallel: same results as one thread (each mode has its own cache)
  auto r = convert::calibrate_kv(c.file->path(), calib);
  if (!r.ok()) return c.error = last_error_message(), c;
  c.result = std::move(r).value();
  contents.kv_profile = c.result.profile;
  if (!convert::write_bundle(c.file->path(), contents).ok()) return c.error = last_error_message(), c;
  return c;
}

struct ModelCase {
  const char* name;
  const char* source;  // under ../shared when third_party, else in the repository
  bool f32_embed;
  bool third_party;
  std::string path() const { return third_party ? testing::shared_path(source) : testing::repo_path(source); }
};

class KvCalibrateTest : public ::testing::TestWithParam<ModelCase> {
 protected:
  void SetUp() override {
    if (GetParam().third_party) TERN_REQUIRE_SHARED(GetParam().source);
    const Calibrated& c = calibrated(GetParam().path(), GetParam().f32_embed);
    ASSERT_TRUE(c.error.empty()) << c.error;
    path_ = c.file->path();
    result_ = &c.result;
    auto b = Bundle::open(path_.c_str());
    ASSERT_TRUE(b.ok()) << "the calibrated bundle must verify: " << last_error_message();
    bundle_ = std::make_unique<Bundle>(std::move(b).value());
  }
  std::string path_;
  const convert::CalibrationResult* result_ = nullptr;
  std::unique_ptr<Bundle> bundle_;
};

TEST_P(KvCalibrateTest, ProfileRoundTripsAndAllocationsMeetTheirAverages) {
  const ModelConfig& c = bundle_->config();
  const schema::KvProfile* p = bundle_->kv_profile();
  ASSERT_NE(p, nullptr);
  const size_t n = static_cast<size_t>(c.layers) * c.kv_heads;
  const uint32_t group = c.heads / c.kv_heads;
  ASSERT_EQ(p->heads()->size(), n);
  EXPECT_EQ(p->sink_tokens(), 4u);
  EXPECT_EQ(p->recent_window(), 32u);
  EXPECT_EQ(p->average_bits(), 4.0f);
  ASSERT_NE(p->sensitivity_widths(), nullptr);
  EXPECT_EQ(std::vector<uint8_t>(p->sensitivity_widths()->begin(), p->sensitivity_widths()->end()),
            (std::vector<uint8_t>{2, 3, 4, 8}));

  // Sink heads: by the entropies the bundle records, independently of the calibrator's flag.
  std::vector<bool> sink(n);
  for (const schema::KvHeadProfile* h : *p->heads()) {
    const size_t i = static_cast<size_t>(h->layer()) * c.kv_heads + h->kv_head();
    ASSERT_EQ(h->query_shannon_entropy()->size(), group);
    float lowest = 1e9f;
    for (float e : *h->query_shannon_entropy()) lowest = std::min(lowest, e);
    EXPECT_FLOAT_EQ(h->shannon_entropy(), lowest) << "GQA combine is the minimum";
    sink[i] = lowest < 0.5f;
    EXPECT_EQ(h->sink(), sink[i]);
    EXPECT_EQ(h->class_() == schema::KvClass::Sink, sink[i]);
    ASSERT_EQ(h->sensitivity()->size(), 4u);
    for (float s : *h->sensitivity()) EXPECT_GE(s, 0.0f);
    // Narrower is worse on average: 2-bit sensitivity above 8-bit.
    EXPECT_GE(h->sensitivity()->Get(0), h->sensitivity()->Get(3));
  }
  const size_t quantized = static_cast<size_t>(std::count(sink.begin(), sink.end(), false));

  ASSERT_NE(p->allocations(), nullptr);
  std::vector<float> averages;
  for (const schema::KvAllocation* a : *p->allocations()) {
    averages.push_back(a->average_bits());
    ASSERT_EQ(a->key_bits()->size(), n);
    ASSERT_EQ(a->value_bits()->size(), n);
    int total = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint8_t k = a->key_bits()->Get(static_cast<uint32_t>(i)),
                    v = a->value_bits()->Get(static_cast<uint32_t>(i));
      if (sink[i]) {
        EXPECT_EQ(k, 0) << "sink head " << i << " must stay exact";
        EXPECT_EQ(v, 0);
        continue;
      }
      EXPECT_TRUE(k == 2 || k == 3 || k == 4 || k == 8) << int(k);
      EXPECT_EQ(k, v) << "keys and values share the head's width";
      total += k;
    }
    // Exactly the average over the quantized heads (all the averages are reachable here).
    EXPECT_EQ(total, static_cast<int>(std::lround(a->average_bits() * static_cast<double>(quantized))))
        << "average " << a->average_bits();
    const std::string rule = a->rule()->str();
    EXPECT_TRUE(rule == "uniform" || rule == "sensitivity" || rule == "entropy") << rule;
    // The primary allocation is the per-head table.
    if (a->average_bits() == p->average_bits()) {
      for (const schema::KvHeadProfile* h : *p->heads()) {
        const size_t i = static_cast<size_t>(h->layer()) * c.kv_heads + h->kv_head();
        if (!h->sink()) {
          EXPECT_EQ(h->key_bits(), a->key_bits()->Get(static_cast<uint32_t>(i)));
        }
      }
    }
  }
  EXPECT_EQ(averages, (std::vector<float>{2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 6.0f, 8.0f}));
}

TEST_P(KvCalibrateTest, ProfileForAveragePicksTheRecordedAllocation) {
  const ModelConfig& c = bundle_->config();
  const schema::KvProfile* p = bundle_->kv_profile();
  ASSERT_NE(p, nullptr);
  const size_t n = static_cast<size_t>(c.layers) * c.kv_heads;
  for (const schema::KvAllocation* a : *p->allocations()) {
    std::vector<KvHeadBits> bits(n);
    KvCacheProfile out;
    ASSERT_EQ(kv_profile_for_average(p, kv_shape_of(c), a->average_bits(), bits.data(), &out), Error::Ok)
        << last_error_message();
    EXPECT_EQ(out.head_bits, bits.data());
    EXPECT_EQ(out.sink_tokens, 4u);
    EXPECT_EQ(out.recent_window, 32u);
    EXPECT_EQ(out.block_tokens, 32u);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(bits[i].key_bits, a->key_bits()->Get(static_cast<uint32_t>(i)));
      EXPECT_EQ(bits[i].value_bits, a->value_bits()->Get(static_cast<uint32_t>(i)));
    }
  }
  std::vector<KvHeadBits> bits(n);
  KvCacheProfile out;
  EXPECT_EQ(kv_profile_for_average(p, kv_shape_of(c), 5.0f, bits.data(), &out), Error::NotFound);
  const std::string message = last_error_message();
  EXPECT_NE(message.find("2, 2.5, 3, 3.5, 4, 6, 8"), std::string::npos) << message;
  EXPECT_EQ(kv_profile_for_average(nullptr, kv_shape_of(c), 4.0f, bits.data(), &out), Error::NotFound);
}

// What the calibrator guarantees by construction, re-measured from the bundle alone.
TEST_P(KvCalibrateTest, AdaptiveNeverWorseThanUniformOnTheCalibrationText) {
  ModelParams params;
  auto model = Model::load(path_.c_str(), params);
  ASSERT_TRUE(model.ok()) << last_error_message();
  auto ids = kvq::tokenize_text(**model, convert::kBuiltinCalibrationText, false);
  ASSERT_TRUE(ids.ok());
  ids->resize(std::min<size_t>(ids->size(), kCalibTokens));
  const kvq::KvSettings settings = kvq::settings_from_model(**model, kvq::KvSettings{});
  std::vector<kvq::KvMode> modes;
  std::vector<std::string> rules;
  for (const schema::KvAllocation* a : *(*model)->bundle()->kv_profile()->allocations()) {
    char avg[16];
    std::snprintf(avg, sizeof(avg), "%g", static_cast<double>(a->average_bits()));
    for (const char* kind : {"adaptive:", "uniform:"}) {
      auto m = kvq::mode_by_name(**model, kind + std::string(avg), settings);
      ASSERT_TRUE(m.ok()) << last_error_message();
      modes.push_back(std::move(m).value());
    }
    rules.push_back(a->rule()->str());
  }
  kvq::RunOptions run;
  run.attention_cosine = false;
  run.per_position = true;
  auto r = kvq::run_modes(**model, modes, *ids, run);
  ASSERT_TRUE(r.ok()) << last_error_message();
  size_t adaptive_wins = 0;
  for (size_t i = 0; i < rules.size(); ++i) {
    const kvq::KvMode& am = modes[2 * i];
    const kvq::KvMode& um = modes[2 * i + 1];
    const kvq::ModeStats& a = r->modes[2 * i];
    const kvq::ModeStats& u = r->modes[2 * i + 1];
    EXPECT_DOUBLE_EQ(am.bytes_per_token(), um.bytes_per_token()) << am.name << ": equal bytes";
    for (const kvq::ModeStats* s : {&a, &u}) {
      // The paired per-position sum and the two separate NLL sums describe the same ΔPPL.
      EXPECT_NEAR(s->delta_ppl_percent(), 100.0 * (s->ppl() / r->reference.ppl() - 1.0), 1e-6) << am.name;
      EXPECT_GT(s->delta_ppl_se_percent(), 0.0) << am.name << ": a quantized cache moves some position's NLL";
      EXPECT_LT(s->delta_ppl_se_percent(), 5.0) << am.name;
    }
    // The paired comparison against the totals it summarizes.
    auto cmp = kvq::compare(a, u);
    ASSERT_TRUE(cmp.ok()) << last_error_message();
    EXPECT_EQ(cmp->positions, a.predictions);
    EXPECT_NEAR(cmp->delta_ppl_percent, 100.0 * (a.ppl() / u.ppl() - 1.0), 1e-3) << am.name;
    EXPECT_NEAR(cmp->delta_agreement_points, 100.0 * (double(a.agree) - double(u.agree)) / double(a.predictions), 1e-9);
    auto self = kvq::compare(a, a);
    ASSERT_TRUE(self.ok());
    EXPECT_EQ(self->delta_ppl_percent, 0.0);
    EXPECT_EQ(self->delta_ppl_se_percent, 0.0);
    EXPECT_LE(a.kl, u.kl + 1e-12) << am.name << " (" << rules[i] << ") KL " << a.mean_kl() << " vs " << u.mean_kl();
    EXPECT_GE(a.agree, u.agree) << am.name << " (" << rules[i] << ")";
    if (rules[i] != "uniform") {
      ++adaptive_wins;
      bool differs = false;
      for (size_t h = 0; h < am.bits.size(); ++h)
        differs |= am.bits[h].key_bits != um.bits[h].key_bits || am.bits[h].value_bits != um.bits[h].value_bits;
      EXPECT_TRUE(differs) << am.name << " is recorded as " << rules[i] << " but equals uniform";
    }
  }
  // The uniform widths at 2 and 8 bits leave nothing to reallocate; some average in between
  // must have found a better allocation, or the calibrator is not doing its job.
  EXPECT_GT(adaptive_wins, 0u);
}

// tern-eval's exact-mode perplexity against a plain Session (prefill, then decode token by
// token, log-softmax of Session::logits()), computed here independently.
TEST_P(KvCalibrateTest, ExactPerplexityMatchesASessionRun) {
  ModelParams params;
  params.kv_type = KvType::F32;
  auto model = Model::load(path_.c_str(), params);
  ASSERT_TRUE(model.ok()) << last_error_message();
  auto ids = kvq::tokenize_text(**model, convert::kBuiltinCalibrationText, false);
  ASSERT_TRUE(ids.ok());
  const uint32_t n = 160;
  ASSERT_GE(ids->size(), n);
  ids->resize(n);
  std::vector<kvq::KvMode> modes;
  auto f32 = kvq::mode_by_name(**model, "f32", kvq::KvSettings{});
  ASSERT_TRUE(f32.ok());
  modes.push_back(std::move(f32).value());
  kvq::RunOptions run;
  auto r = kvq::run_modes(**model, modes, *ids, run);
  ASSERT_TRUE(r.ok()) << last_error_message();
  EXPECT_EQ(r->modes[0].predictions, n - 1);
  EXPECT_EQ(r->modes[0].agree, n - 1);
  EXPECT_NEAR(r->modes[0].mean_cosine(), 1.0, 1e-9) << "the same cache type attends identically";
  EXPECT_EQ(r->modes[0].dnll_sq, 0.0) << "an exact cache changes no position's NLL";
  EXPECT_FALSE(kvq::compare(r->modes[0], r->reference).ok()) << "the reference keeps no per-position records here";

  auto session = (*model)->create_session(SamplerParams{});
  ASSERT_TRUE(session.ok()) << last_error_message();
  double nll = 0;
  for (uint32_t pos = 0; pos + 1 < n; ++pos) {
    ASSERT_EQ((*session)->decode((*ids)[pos]), Error::Ok) << last_error_message();
    const float* logits = (*session)->logits();
    const uint32_t vocab = (*model)->config().vocab;
    const double mx = *std::max_element(logits, logits + vocab);
    double sum = 0;
    for (uint32_t v = 0; v < vocab; ++v) sum += std::exp(double(logits[v]) - mx);
    nll += mx + std::log(sum) - logits[(*ids)[pos + 1]];
  }
  (*model)->destroy_session(*session);
  const double ppl = std::exp(nll / (n - 1));
  EXPECT_NEAR(r->reference.ppl(), ppl, 1e-4 * ppl);
  EXPECT_NEAR(r->modes[0].ppl(), ppl, 1e-4 * ppl);
  EXPECT_GT(ppl, 1.5);  // real text, a real model: far from certain, far from uniform
  EXPECT_LT(ppl, (*model)->config().vocab / 4.0);
}

TEST_P(KvCalibrateTest, ModeNamesAndErrors) {
  ModelParams params;
  auto model = Model::load(path_.c_str(), params);
  ASSERT_TRUE(model.ok());
  const kvq::KvSettings s;
  EXPECT_EQ(kvq::mode_by_name(**model, "q5", s).error(), Error::InvalidArgument);
  EXPECT_EQ(kvq::mode_by_name(**model, "adaptive:5", s).error(), Error::NotFound);
  EXPECT_EQ(kvq::mode_by_name(**model, "uniform:1", s).error(), Error::InvalidArgument);
  auto q4 = kvq::mode_by_name(**model, "q4", s);
  ASSERT_TRUE(q4.ok());
  auto u4 = kvq::mode_by_name(**model, "uniform:4", s);
  ASSERT_TRUE(u4.ok());
  // No sink heads in these models: uniform:4 is q4.
  if (std::none_of(result_->profile.heads.begin(), result_->profile.heads.end(),
                   [](const auto& h) { return h.sink; })) {
    EXPECT_DOUBLE_EQ(q4->bytes_per_token(), u4->bytes_per_token());
  }
  auto fp16 = kvq::mode_by_name(**model, "fp16", s);
  ASSERT_TRUE(fp16.ok());
  const ModelConfig& c = (*model)->config();
  EXPECT_DOUBLE_EQ(fp16->bytes_per_token(), 2.0 * 2 * c.layers * c.kv_heads * c.head_dim);
  EXPECT_DOUBLE_EQ(fp16->bits_per_element(), 16.0);
  // q4 with f16 scales per 32: 4 + 32/32 = 5 bits per element.
  EXPECT_NEAR(q4->bits_per_element(), 5.0, 1e-9);
}

// Under the sanitizers one model is enough to check the calibrator's memory use (both
// calibrations took ~160 s of the CI's sanitizer stage); the Release run checks both.
#if defined(__SANITIZE_ADDRESS__)
INSTANTIATE_TEST_SUITE_P(Models, KvCalibrateTest,
                         ::testing::Values(ModelCase{"tiny_austen", "examples/models/tiny-austen", false, false}),
#else
INSTANTIATE_TEST_SUITE_P(Models, KvCalibrateTest,
                         ::testing::Values(ModelCase{"tiny_austen", "examples/models/tiny-austen", false, false},
                                           ModelCase{"bitllama2c_3M", "models/bitllama2c-3M/bit_model.bin", true,
                                                     true}),
#endif
                         [](const ::testing::TestParamInfo<ModelCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tern
