// Converted bundles through Model::load against references computed elsewhere:
// tiny-austen (bf16 and packed) vs the PyTorch reference_logits.json, the synthetic GGUF
// encodings vs the float64 int8-activation reference, bitllama2c-3M text vs its reader.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "include/tern.h"
#include "runtime/engine/model.h"
#include "runtime/engine/session.h"
#include "tests/support/bundle_util.h"

namespace tern {
namespace {

constexpr float kTieGap = 0.02f;
// tiny-austen: the text "The state of the Union..." has a float-order rounding flip of
// one int8 activation code at position 1 (our logits move by up to 0.13 from there on),
// and position 10 then has a reference gap of 0.0215: too close to call. Elsewhere the
// logits agree to 1e-4 or better. So top-1 is checked where the gap exceeds 0.03.
constexpr float kAustenTieGap = 0.03f;

int32_t argmax(const float* x, size_t n) { return static_cast<int32_t>(std::max_element(x, x + n) - x); }

std::unique_ptr<Model> load(const std::string& name, KvType kv = KvType::F32) {
  ModelParams params;
  params.kv_type = kv;
  auto model = Model::load(testing::bundle_path(name).c_str(), params);
  EXPECT_TRUE(model.ok()) << last_error_message();
  return model.ok() ? std::move(model).value() : nullptr;
}

struct AustenCase {
  std::string text;
  std::vector<int32_t> ids;
  std::vector<std::vector<int32_t>> top5_ids;
  std::vector<std::vector<float>> top5_logits;
  std::vector<float> last_logits;
};

std::vector<AustenCase> read_austen_reference() {
  std::ifstream in(testing::tiny_austen_reference_logits());
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<AustenCase> cases;
  for (const auto& c : j.at("cases")) {
    AustenCase a;
    a.text = c.at("text").get<std::string>();
    a.ids = c.at("ids").get<std::vector<int32_t>>();
    a.top5_ids = c.at("top5_ids").get<std::vector<std::vector<int32_t>>>();
    a.top5_logits = c.at("top5_logits").get<std::vector<std::vector<float>>>();
    a.last_logits = c.at("last_logits").get<std::vector<float>>();
    cases.push_back(std::move(a));
  }
  return cases;
}

class TinyAusten : public ::testing::TestWithParam<const char*> {};

TEST_P(TinyAusten, LogitsMatchPyTorchReference) {
  const std::string name = std::string("tiny-austen-") + GetParam() + ".tern";
  TERN_REQUIRE_BUNDLE(name);
  TERN_REQUIRE_FILE(testing::tiny_austen_reference_logits());
  auto model = load(name);
  ASSERT_NE(model, nullptr);
  auto session = model->create_session(SamplerParams{});
  ASSERT_TRUE(session.ok()) << last_error_message();
  Session& s = **session;
  const uint32_t vocab = model->config().vocab;
  float max_top5_error = 0.0f, max_last_error = 0.0f;
  size_t checked = 0, ties = 0;
  for (const AustenCase& c : read_austen_reference()) {
    // The bundle's tokenizer gives the reference ids.
    std::vector<int32_t> ids(c.ids.size() + 8);
    auto n = model->tokenizer()->encode(c.text.data(), c.text.size(), true, false, ids.data(), ids.size());
    ASSERT_TRUE(n.ok()) << last_error_message();
    ids.resize(*n);
    EXPECT_EQ(ids, c.ids) << c.text;

    s.reset();
    for (size_t i = 0; i < c.ids.size(); ++i) {
      ASSERT_EQ(s.decode(c.ids[i]), Error::Ok) << last_error_message();
      const float* logits = s.logits();
      for (size_t k = 0; k < 5; ++k) {
        max_top5_error = std::max(max_top5_error, std::fabs(logits[c.top5_ids[i][k]] - c.top5_logits[i][k]));
      }
      if (c.top5_logits[i][0] - c.top5_logits[i][1] <= kAustenTieGap) {
        ++ties;
        continue;
      }
      EXPECT_EQ(argmax(logits, vocab), c.top5_ids[i][0]) << c.text << " position " << i;
      ++checked;
    }
    // The last position again through one batched prefill (the GEMM path), all 2048 logits.
    s.reset();
    ASSERT_EQ(s.prefill(c.ids.data(), c.ids.size()), Error::Ok) << last_error_message();
    for (uint32_t v = 0; v < vocab; ++v) {
      max_last_error = std::max(max_last_error, std::fabs(s.logits()[v] - c.last_logits[v]));
    }
    EXPECT_EQ(argmax(s.logits(), vocab), argmax(c.last_logits.data(), vocab));
  }
  std::printf("tiny-austen %s: top-1 checked at %zu positions (%zu near-ties), max |error| top-5 %.5f, last %.5f\n",
              GetParam(), checked, ties, max_top5_error, max_last_error);
  // bf16 holds the reference's own weights (error only from that rounding flip); packed
  // rounds every scale to bf16 (~0.4% each).
  const float bound = std::string(GetParam()) == "bf16" ? 0.15f : 0.3f;
  EXPECT_LT(max_top5_error, bound);
  EXPECT_LT(max_last_error, bound);
}

INSTANTIATE_TEST_SUITE_P(Layouts, TinyAusten, ::testing::Values("bf16", "packed"));

// "pos P token T argmax A" followed by the logits.
bool read_logits_line(const std::string& path, int* pos, int* arg, std::vector<float>* logits) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("pos ", 0) != 0) continue;
    std::istringstream ls(line);
    std::string word;
    int token = 0;
    ls >> word >> *pos >> word >> token >> word >> *arg;
    float v;
    logits->clear();
    while (ls >> v) logits->push_back(v);
    return true;
  }
  return false;
}

class SyntheticGguf : public ::testing::TestWithParam<const char*> {};

TEST_P(SyntheticGguf, LogitsMatchFloat64Int8Reference) {
  const std::string name = std::string("tiny-") + GetParam() + ".tern";
  const std::string ref_path = "models/synthetic-tiny-gguf/logits-reference-int8-activations.txt";
  TERN_REQUIRE_SHARED_BUNDLE(name, ref_path);
  int pos = 0, ref_argmax = 0;
  std::vector<float> ref;
  ASSERT_TRUE(read_logits_line(testing::shared_path(ref_path), &pos, &ref_argmax, &ref));
  const std::vector<int32_t> tokens = {509, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 260, 300};
  ASSERT_EQ(pos + 1, static_cast<int>(tokens.size()));
  auto model = load(name);
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(ref.size(), model->config().vocab);
  auto session = model->create_session(SamplerParams{});
  ASSERT_TRUE(session.ok()) << last_error_message();
  ASSERT_EQ((*session)->prefill(tokens.data(), tokens.size()), Error::Ok) << last_error_message();
  const float* logits = (*session)->logits();
  float max_error = 0.0f;
  double dot = 0.0, norm_a = 0.0, norm_b = 0.0;
  for (size_t v = 0; v < ref.size(); ++v) {
    max_error = std::max(max_error, std::fabs(logits[v] - ref[v]));
    dot += static_cast<double>(logits[v]) * ref[v];
    norm_a += static_cast<double>(logits[v]) * logits[v];
    norm_b += static_cast<double>(ref[v]) * ref[v];
  }
  const double cosine = dot / std::sqrt(norm_a * norm_b);
  std::printf("synthetic-tiny %s: max |logit error| %.4f, cosine %.6f vs the float64 int8-activation reference\n",
              GetParam(), max_error, cosine);
  EXPECT_EQ(argmax(logits, ref.size()), ref_argmax);
  // The GGUF files hold f16 (or block-quantized) embeddings while the reference used the
  // float weights; int8 activation rounding amplifies that into ~0.2-0.45 logit noise on
  // these random weights (the engines' own logits sit at the same distance). With float
  // activations our pass matches llama.cpp's float logits to 0.005.
  EXPECT_LT(max_error, 0.6f);
  EXPECT_GT(cosine, 0.996);  // llama.cpp on tq2_0: 0.9977, bitnet.cpp on i2_s: 0.9992
}

INSTANTIATE_TEST_SUITE_P(Encodings, SyntheticGguf, ::testing::Values("f16", "tq2_0", "tq1_0", "i2_s"));

int append_text(const char* text, size_t size, void* out) {
  static_cast<std::string*>(out)->append(text, size);
  return 0;
}

TEST(Bitllama2cBundle, GreedyTextMatchesReferenceUpToTheNearTie) {
  TERN_REQUIRE_SHARED_BUNDLE("bitllama2c-3M.tern", "models/bitllama2c-3M/greedy_once_upon_a_time_n256.txt");
  std::ifstream in(testing::shared_path("models/bitllama2c-3M/greedy_once_upon_a_time_n256.txt"));
  const std::string reference((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The README's near-tie is after "Lily was" (about 370 characters after the prompt).
  const std::string tie_marker = "Lily was";
  const size_t tie = reference.find(tie_marker, 300);
  ASSERT_NE(tie, std::string::npos);
  const size_t must_match = tie + tie_marker.size();

  tern_model_params mp = tern_model_default_params();
  mp.kv_mode = "f32";  // the reference's precision (the default fp16 cache moves the near-ties)
  tern_model* model = nullptr;
  ASSERT_EQ(tern_model_load(testing::bundle_path("bitllama2c-3M.tern").c_str(), &mp, &model), TERN_OK)
      << tern_last_error_message();
  tern_session_params sp = tern_session_default_params();
  sp.sampler.temperature = 0.0f;
  tern_session* session = nullptr;
  ASSERT_EQ(tern_session_create(model, &sp, &session), TERN_OK) << tern_last_error_message();
  const std::string prompt = "Once upon a time";
  std::string text = prompt;
  tern_generate_params gp = tern_generate_default_params();
  gp.max_new_tokens = 200;
  tern_generate_stats st{};
  ASSERT_EQ(tern_generate(session, prompt.data(), prompt.size(), &gp, append_text, &text, &st), TERN_OK)
      << tern_last_error_message();
  EXPECT_EQ(st.prompt_tokens, 5u);  // BOS + 4 pieces
  ASSERT_GE(text.size(), must_match) << text;
  EXPECT_EQ(text.substr(0, must_match), reference.substr(0, must_match));
  tern_session_free(session);
  tern_model_free(model);
}

}  // namespace
}  // namespace tern
