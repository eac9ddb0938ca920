// Log-probabilities on tiny-austen through the C API (tern_sample_logprobs) against a float64
// log-softmax of the logits tern_get_logits exposes, with the session's logit bias, grammar
// mask, penalties and temperature applied here from their documented definitions; and the
// token callback of Session::generate against the manual loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "include/tern.h"
#include "runtime/engine/model.h"
#include "runtime/engine/session.h"
#include "tests/support/bundle_util.h"

namespace {

constexpr const char* kBundle = "tiny-austen-packed.tern";
constexpr const char* kPrompt = "It is a truth universally acknowledged, that a single man in possession of a good";
constexpr double kTolerance = 1e-4;

// What a case sets on its session, which the reference applies again.
struct Settings {
  tern_sampler_params sampler = tern_sampler_default_params();
  std::vector<tern_logit_bias> bias;
  bool ban_argmax = false;      // each step, a -inf bias on the most likely token of the raw logits
  bool digits_grammar = false;  // root ::= [0-9]+
  uint32_t top_n = 20;
};

// What a run of a case saw.
struct Outcome {
  double worst = 0.0;                  // the largest |difference| from the reference
  double off_without_penalties = 0.0;  // the largest from the reference without the penalties
  int steps = 0;
};

class Logprobs : public ::testing::Test {
 protected:
  void SetUp() override {
    TERN_REQUIRE_BUNDLE(kBundle);
    load(2 << 20);
  }
  void TearDown() override { tern_model_free(model_); }

  void load(uint64_t grammar_bytes) {
    tern_model_free(model_);
    model_ = nullptr;
    tern_model_params mp = tern_model_default_params();
    mp.n_ctx = 256;
    mp.n_sessions = 2;
    mp.grammar_bytes = grammar_bytes;
    ASSERT_EQ(tern_model_load(tern::testing::bundle_path(kBundle).c_str(), &mp, &model_), TERN_OK)
        << tern_last_error_message();
    ASSERT_EQ(tern_model_get_info(model_, &info_), TERN_OK);
    // Each token's bytes after other text: what follows "The" when it is detokenized after it.
    const int32_t the = tokenize("The", false).at(0);
    const std::string before = detokenize({the});
    texts_.assign(info_.vocab_size, std::string());
    for (uint32_t id = 0; id < info_.vocab_size; ++id) {
      texts_[id] = detokenize({the, static_cast<int32_t>(id)}).substr(before.size());
    }
  }

  std::vector<int32_t> tokenize(const char* text, bool special) {
    std::vector<int32_t> out(512);
    size_t n = 0;
    EXPECT_EQ(tern_tokenize(model_, text, std::strlen(text), 0, special, out.data(), out.size(), &n), TERN_OK);
    out.resize(n);
    return out;
  }
  std::string detokenize(const std::vector<int32_t>& tokens) {
    char buf[4096];
    size_t size = 0;
    EXPECT_EQ(tern_detokenize(model_, tokens.data(), tokens.size(), buf, sizeof buf, &size), TERN_OK);
    return std::string(buf, size);
  }
  bool is_end(int32_t id) const { return id == info_.eos_id || id == info_.eot_id; }
  bool is_digits(int32_t id) const {
    const std::string& t = texts_[id];
    return !t.empty() && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  }

  // The distribution the session draws from, in float64: bias, grammar mask, penalties over
  // the last repeat_last_n tokens, temperature (0: as 1), log-softmax.
  std::vector<double> reference(const float* logits, const std::vector<int32_t>& history, const tern_sampler_params& sp,
                                const std::vector<tern_logit_bias>& bias, const std::vector<bool>* allowed) const {
    std::vector<double> l(logits, logits + info_.vocab_size);
    for (const tern_logit_bias& b : bias) l[b.token] += b.bias;
    if (allowed != nullptr) {
      for (size_t i = 0; i < l.size(); ++i) {
        if (!(*allowed)[i]) l[i] = -INFINITY;
      }
    }
    std::vector<int> count(l.size());
    const size_t window = std::min(history.size(), static_cast<size_t>(sp.repeat_last_n));
    for (size_t i = history.size() - window; i < history.size(); ++i) ++count[history[i]];
    for (size_t i = 0; i < l.size(); ++i) {
      if (count[i] == 0) continue;
      l[i] = l[i] > 0 ? l[i] / sp.repeat_penalty : l[i] * sp.repeat_penalty;
      l[i] -= count[i] * static_cast<double>(sp.frequency_penalty) + sp.presence_penalty;
    }
    const double t = sp.temperature == 0.0f ? 1.0 : sp.temperature;
    double max = -INFINITY;
    for (double v : l) max = std::max(max, v);
    double sum = 0.0;
    for (double v : l) sum += std::exp((v - max) / t);
    for (double& v : l) v = v == -INFINITY ? -INFINITY : (v - max) / t - std::log(sum);
    return l;
  }

  // The text a logprob entry should carry: the token's bytes after other text, none for a
  // control token.
  void expect_text(const tern_token_logprob& e) {
    ASSERT_NE(e.text, nullptr);
    const std::string text(e.text, e.size);
    if (texts_[e.token].find("\xEF\xBF\xBD") == std::string::npos) {  // not a partial UTF-8 character
      EXPECT_EQ(text, texts_[e.token]) << "token " << e.token;
    } else {
      // Bytes of a character split over tokens: detokenized alone, U+FFFD (3 bytes) per byte.
      EXPECT_TRUE(!text.empty() && text.size() <= texts_[e.token].size()) << "token " << e.token;
    }
  }

  // Up to `steps` tokens (an end token stops) sampled with tern_sample_logprobs and decoded,
  // each checked against the reference.
  Outcome run(const Settings& c, int steps) {
    Outcome out;
    tern_sampler_params unpenalized = c.sampler;
    unpenalized.repeat_penalty = 1.0f;
    unpenalized.presence_penalty = unpenalized.frequency_penalty = 0.0f;
    tern_session_params sp = tern_session_default_params();
    sp.sampler = c.sampler;
    tern_session* s = nullptr;
    EXPECT_EQ(tern_session_create(model_, &sp, &s), TERN_OK) << tern_last_error_message();
    if (s == nullptr) return out;
    const char* digits = "root ::= [0-9]+";
    if (c.digits_grammar) {
      EXPECT_EQ(tern_session_set_grammar(s, digits, std::strlen(digits)), TERN_OK);
    }
    std::vector<int32_t> history = tokenize(kPrompt, false);
    history.insert(history.begin(), info_.bos_id);
    EXPECT_EQ(tern_prefill(s, history.data(), history.size()), TERN_OK);
    double& worst = out.worst;
    bool digit_seen = false;
    for (int step = 0; step < steps && !HasFailure(); ++step, ++out.steps) {
      const float* logits = nullptr;
      size_t vocab = 0;
      EXPECT_EQ(tern_get_logits(s, &logits, &vocab), TERN_OK);
      EXPECT_EQ(vocab, info_.vocab_size);
      std::vector<tern_logit_bias> bias = c.bias;
      const int32_t argmax = static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
      if (c.ban_argmax) bias.push_back({argmax, -INFINITY});
      EXPECT_EQ(tern_session_set_logit_bias(s, bias.data(), bias.size()), TERN_OK);
      std::vector<bool> allowed(vocab);
      for (size_t i = 0; i < vocab; ++i)
        allowed[i] = is_digits(static_cast<int32_t>(i)) || (digit_seen && is_end(static_cast<int32_t>(i)));
      const std::vector<double> ref =
          reference(logits, history, c.sampler, bias, c.digits_grammar ? &allowed : nullptr);
      const std::vector<double> ref0 =
          reference(logits, history, unpenalized, bias, c.digits_grammar ? &allowed : nullptr);

      int32_t token = -1;
      tern_token_logprob chosen{};
      tern_token_logprob top[20];
      size_t n_top = 999;
      EXPECT_EQ(tern_sample_logprobs(s, c.top_n, &token, &chosen, top, &n_top), TERN_OK) << tern_last_error_message();
      EXPECT_EQ(chosen.token, token);
      EXPECT_TRUE(std::isfinite(ref[token])) << "sampled a token the reference gives no chance";
      worst = std::max(worst, std::abs(chosen.logprob - ref[token]));
      EXPECT_NEAR(chosen.logprob, ref[token], kTolerance) << "step " << step;
      expect_text(chosen);
      if (c.ban_argmax) {
        EXPECT_NE(token, argmax);
      }
      if (c.sampler.temperature == 0.0f) {
        EXPECT_EQ(chosen.logprob, top[0].logprob) << "greedy takes the most likely";
      }

      std::vector<int32_t> ranked;
      for (size_t i = 0; i < vocab; ++i) {
        if (std::isfinite(ref[i])) ranked.push_back(static_cast<int32_t>(i));
      }
      std::stable_sort(ranked.begin(), ranked.end(), [&](int32_t a, int32_t b) { return ref[a] > ref[b]; });
      const size_t n = std::min<size_t>(c.top_n, ranked.size());
      EXPECT_EQ(n_top, n);
      std::vector<int32_t> listed;
      for (size_t k = 0; k < std::min(n, n_top); ++k) {
        const double want = ref[ranked[k]];
        worst = std::max({worst, std::abs(top[k].logprob - want), std::abs(top[k].logprob - ref[top[k].token])});
        EXPECT_NEAR(top[k].logprob, want, kTolerance) << "step " << step << " rank " << k;
        EXPECT_NEAR(top[k].logprob, ref[top[k].token], kTolerance) << "step " << step << " rank " << k;
        // The id itself where no other token comes within the tolerance.
        const bool clear = (k == 0 || ref[ranked[k - 1]] - want > kTolerance) &&
                           (k + 1 >= ranked.size() || want - ref[ranked[k + 1]] > kTolerance);
        if (clear) {
          EXPECT_EQ(top[k].token, ranked[k]) << "step " << step << " rank " << k;
        }
        if (c.digits_grammar) {
          EXPECT_TRUE(allowed[top[k].token]) << "a masked token listed: " << top[k].token;
        }
        expect_text(top[k]);
        listed.push_back(top[k].token);
        out.off_without_penalties = std::max(out.off_without_penalties, std::abs(top[k].logprob - ref0[top[k].token]));
      }
      std::sort(listed.begin(), listed.end());
      EXPECT_EQ(std::adjacent_find(listed.begin(), listed.end()), listed.end()) << "a token listed twice";

      if (is_end(token)) break;
      digit_seen = digit_seen || is_digits(token);
      EXPECT_EQ(tern_decode(s, token), TERN_OK);
      history.push_back(token);
    }
    tern_session_free(s);
    return out;
  }

  tern_model* model_ = nullptr;
  tern_model_info info_{};
  std::vector<std::string> texts_;
};

tern_sampler_params sampler(float temperature) {
  tern_sampler_params p = tern_sampler_default_params();
  p.temperature = temperature;
  p.seed = 36;
  return p;
}

// The largest difference, for the record (the assertions are in run()).
void report(const char* what, const Outcome& o) {
  std::printf("%s: %d steps, max |diff| from the float64 reference %.3g\n", what, o.steps, o.worst);
}

TEST_F(Logprobs, GreedyIsTheLogSoftmaxOfTheLogits) {
  Settings c;
  c.sampler = sampler(0.0f);
  const Outcome o = run(c, 16);
  report("greedy", o);
}

TEST_F(Logprobs, TemperatureScalesAndTheTailCutsDoNot) {
  Settings c;
  c.sampler = sampler(0.7f);
  c.sampler.top_k = 10;
  c.sampler.top_p = 0.8f;
  c.sampler.min_p = 0.1f;
  c.top_n = 5;
  const Outcome o = run(c, 16);
  report("temperature 0.7", o);
}

TEST_F(Logprobs, PenaltiesAreApplied) {
  Settings c;
  c.sampler = sampler(0.9f);
  c.sampler.repeat_penalty = 1.3f;
  c.sampler.presence_penalty = 0.5f;
  c.sampler.frequency_penalty = 0.4f;
  c.sampler.repeat_last_n = 24;
  const Outcome o = run(c, 24);
  report("penalties", o);
  EXPECT_GT(o.off_without_penalties, 0.1) << "the penalties change nothing here: the case tests nothing";
}

TEST_F(Logprobs, ABiasThatBansTheArgmaxLeavesItOut) {
  Settings c;
  c.sampler = sampler(0.0f);
  c.ban_argmax = true;
  c.bias = {{tokenize(" Elizabeth", false).at(0), 2.5f}};
  const Outcome o = run(c, 12);
  report("logit bias", o);
}

TEST_F(Logprobs, AGrammarMasksTokensToMinusInfinity) {
  Settings c;
  c.sampler = sampler(0.8f);
  c.digits_grammar = true;
  const Outcome o = run(c, 12);
  report("grammar", o);
  EXPECT_GE(o.steps, 3) << "the grammar ended the text before it was tested much";
}

TEST_F(Logprobs, WithoutGrammarMemoryTheTextsAreTheSame) {
  load(0);
  Settings c;
  c.sampler = sampler(0.0f);
  run(c, 4);
}

TEST_F(Logprobs, TheDrawIsTernSamples) {
  tern_session_params sp = tern_session_default_params();
  sp.sampler = sampler(1.0f);
  tern_session* a = nullptr;
  tern_session* b = nullptr;
  ASSERT_EQ(tern_session_create(model_, &sp, &a), TERN_OK);
  ASSERT_EQ(tern_session_create(model_, &sp, &b), TERN_OK);
  const std::vector<int32_t> prompt = tokenize(kPrompt, false);
  ASSERT_EQ(tern_prefill(a, prompt.data(), prompt.size()), TERN_OK);
  ASSERT_EQ(tern_prefill(b, prompt.data(), prompt.size()), TERN_OK);
  for (int i = 0; i < 24; ++i) {
    int32_t ta = -1, tb = -2;
    tern_token_logprob chosen{};
    tern_token_logprob top[3];
    ASSERT_EQ(tern_sample(a, &ta), TERN_OK);
    ASSERT_EQ(tern_sample_logprobs(b, 3, &tb, &chosen, top, nullptr), TERN_OK);
    ASSERT_EQ(ta, tb) << "draw " << i;
    ASSERT_EQ(tern_decode(a, ta), TERN_OK);
    ASSERT_EQ(tern_decode(b, tb), TERN_OK);
  }
  // Arguments: at most 20 alternatives, somewhere to put them, and no log-probabilities asked.
  int32_t token = -1;
  tern_token_logprob chosen{};
  tern_token_logprob top[21];
  size_t n_top = 7;
  EXPECT_EQ(tern_sample_logprobs(a, 21, &token, &chosen, top, &n_top), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(tern_sample_logprobs(a, 1, &token, &chosen, nullptr, &n_top), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(tern_sample_logprobs(a, 0, &token, nullptr, nullptr, &n_top), TERN_OK);
  EXPECT_EQ(n_top, 0u);
  EXPECT_GE(token, 0);
  tern_session_free(a);
  tern_session_free(b);
}

// Session::generate's token callback: once per emitted token, before its text, with the
// log-probabilities a manual loop of sample(TokenLogprobs*) gets for the same seed; drafting
// is off while logprobs are asked for, so a drafting session gives the same.
struct Seen {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<int32_t>> tops;
  std::string text;
  std::vector<size_t> text_before;  // text bytes received before each token callback
};

void on_token(int32_t token, float logprob, const tern::TokenLogprob* top, uint32_t n_top, void* user) {
  auto* seen = static_cast<Seen*>(user);
  seen->tokens.push_back(token);
  seen->logprobs.push_back(logprob);
  std::vector<int32_t> ids;
  for (uint32_t k = 0; k < n_top; ++k) ids.push_back(top[k].token);
  seen->tops.push_back(ids);
  seen->text_before.push_back(seen->text.size());
}

bool on_piece(const char* text, size_t size, void* user) {
  static_cast<Seen*>(user)->text.append(text, size);
  return true;
}

TEST(GenerateLogprobs, TheTokenCallbackSeesWhatTheManualLoopSamples) {
  TERN_REQUIRE_BUNDLE(kBundle);
  tern::ModelParams mp;
  mp.context_tokens = 256;
  mp.draft_tokens = 4;
  mp.grammar_bytes = 1 << 20;
  auto model = tern::Model::load(tern::testing::bundle_path(kBundle).c_str(), mp);
  ASSERT_TRUE(model.ok()) << tern_last_error_message();
  tern::SamplerParams sp;
  sp.temperature = 0.8f;
  sp.seed = 7;
  auto session = (*model)->create_session(sp);
  ASSERT_TRUE(session.ok());
  tern::Session& s = **session;

  tern::GenerateOptions o;
  o.max_new_tokens = 40;
  o.logprobs_top = 4;
  o.on_token = on_token;
  Seen seen;
  o.token_user = &seen;
  tern::GenerateStats st;
  ASSERT_EQ(s.set_draft_tokens(4), tern::Error::Ok);
  ASSERT_EQ(s.generate(kPrompt, std::strlen(kPrompt), o, on_piece, &seen, &st), tern::Error::Ok);
  EXPECT_EQ(st.drafted_tokens, 0u) << "drafting stays off while logprobs are asked for";
  const bool ended = st.stop_reason == tern::StopReason::EndOfGeneration;
  ASSERT_EQ(seen.tokens.size(), st.generated_tokens - (ended ? 1 : 0));
  std::string texts;
  for (int32_t t : seen.tokens) {
    const tern::PieceView v = s.token_text(t);
    texts.append(v.data, v.size);
  }
  EXPECT_EQ(texts, seen.text) << "the tokens' texts are the text";
  size_t emitted = 0;  // the text of the tokens before token i
  for (size_t i = 0; i < seen.tokens.size(); ++i) {
    EXPECT_LE(seen.text_before[i], emitted) << "token " << i << " reported after its text";
    emitted += s.token_text(seen.tokens[i]).size;
  }

  // The manual loop from the same seed.
  s.reset();
  std::vector<int32_t> prompt(256);
  size_t needed = 0;
  auto n = (*model)->encode(kPrompt, std::strlen(kPrompt), true, true, prompt.data(), prompt.size(), &needed);
  ASSERT_TRUE(n.ok());
  ASSERT_EQ(s.prefill(prompt.data(), *n), tern::Error::Ok);
  for (size_t i = 0; i < seen.tokens.size(); ++i) {
    tern::TokenLogprobs lp;
    lp.top_n = 4;
    auto token = s.sample(&lp);
    ASSERT_TRUE(token.ok());
    ASSERT_EQ(*token, seen.tokens[i]) << i;
    EXPECT_EQ(lp.logprob, seen.logprobs[i]) << i;
    std::vector<int32_t> ids;
    for (uint32_t k = 0; k < lp.n_top; ++k) ids.push_back(lp.top[k].token);
    EXPECT_EQ(ids, seen.tops[i]) << i;
    ASSERT_EQ(s.decode(*token), tern::Error::Ok);
  }

  // Without logprobs the callback still sees every token (drafted ones too), with NaN.
  s.reset();
  Seen plain;
  o.logprobs_top = tern::GenerateOptions::kNoLogprobs;
  o.token_user = &plain;
  ASSERT_EQ(s.generate(kPrompt, std::strlen(kPrompt), o, on_piece, &plain, &st), tern::Error::Ok);
  EXPECT_GT(st.drafted_tokens, 0u);
  EXPECT_EQ(plain.tokens.size(), st.generated_tokens - (st.stop_reason == tern::StopReason::EndOfGeneration ? 1 : 0));
  for (size_t i = 0; i < plain.tokens.size(); ++i) {
    EXPECT_TRUE(std::isnan(plain.logprobs[i]));
    EXPECT_TRUE(plain.tops[i].empty());
  }
  o.logprobs_top = 21;
  EXPECT_EQ(s.generate(kPrompt, std::strlen(kPrompt), o, on_piece, &plain, &st), tern::Error::InvalidArgument);
}

}  // namespace
