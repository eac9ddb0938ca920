// Speculative sampling's accept rule (speculative_accept): whatever the draft distribution q,
// the token it returns must be distributed as the target's p. Checked statistically on a
// small vocabulary with a fixed seed: the draft is drawn from q, the rule returns a token,
// and the empirical distribution over many trials must pass a chi-square test and a total
// variation bound derived from the trial count. Rules known to be wrong must fail the same
// check, so it has the power to catch a broken rule.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "runtime/engine/sampler.h"

namespace tern {
namespace {

constexpr int kTrials = 200000;
constexpr double kSigmas = 5.0;  // each bound is about 5 standard deviations wide

using Rule = std::function<int32_t(const std::vector<float>& p, const std::vector<float>* q, int32_t draft, Rng& rng)>;

struct Verdict {
  double chi_square = 0, chi_square_limit = 0, tv = 0, tv_limit = 0;
  bool ok() const { return chi_square <= chi_square_limit && tv <= tv_limit; }
};

// q null: the draft is always `fixed_draft` (prompt lookup).
Verdict check(const Rule& rule, const std::vector<float>& p, const std::vector<float>* q, int32_t fixed_draft,
              uint64_t seed) {
  const size_t n = p.size();
  Rng rng(seed);
  std::vector<double> counts(n, 0.0);
  for (int t = 0; t < kTrials; ++t) {
    const int32_t draft = q != nullptr ? draw_from(q->data(), n, rng) : fixed_draft;
    const int32_t out = rule(p, q, draft, rng);
    if (out < 0 || static_cast<size_t>(out) >= n) {
      ADD_FAILURE() << "token " << out << " outside the vocabulary";
      continue;
    }
    counts[out] += 1.0;
  }
  Verdict v;
  size_t cells = 0;
  for (size_t i = 0; i < n; ++i) {
    const double expected = p[i] * kTrials;
    const double freq = counts[i] / kTrials;
    v.tv += 0.5 * std::fabs(freq - p[i]);
    // Sampling noise of a cell's frequency: sqrt(p(1-p)/N); the bound allows kSigmas of it
    // in every cell (and one count's worth where p is 0, which must then stay at 0).
    v.tv_limit += 0.5 * (kSigmas * std::sqrt(p[i] * (1.0 - p[i]) / kTrials) + 1.0 / kTrials);
    if (p[i] > 0) {
      v.chi_square += (counts[i] - expected) * (counts[i] - expected) / expected;
      ++cells;
    } else if (counts[i] > 0) {
      v.chi_square = INFINITY;  // a token p cannot produce
    }
  }
  // The chi-square quantile at kSigmas (one-sided normal tail ~3e-7) for cells - 1 degrees
  // of freedom, by the Wilson-Hilferty approximation.
  const double df = static_cast<double>(cells - 1);
  const double a = 2.0 / (9.0 * df);
  v.chi_square_limit = df * std::pow(1.0 - a + kSigmas * std::sqrt(a), 3.0);
  return v;
}

const Rule kRule = [](const std::vector<float>& p, const std::vector<float>* q, int32_t draft, Rng& rng) {
  return speculative_accept(p.data(), q != nullptr ? q->data() : nullptr, p.size(), draft, rng);
};
// Wrong: keeps every draft (the output is then distributed as q).
const Rule kAlwaysAccept = [](const std::vector<float>&, const std::vector<float>*, int32_t draft, Rng&) {
  return draft;
};
// Wrong: the right acceptance, but a rejection draws from p instead of the residual.
const Rule kResampleFromP = [](const std::vector<float>& p, const std::vector<float>* q, int32_t draft, Rng& rng) {
  const float qx = q != nullptr ? (*q)[draft] : 1.0f;
  if (rng.next_float() * qx < p[draft]) return draft;
  return draw_from(p.data(), p.size(), rng);
};

struct Case {
  const char* name;
  std::vector<float> p, q;  // q empty: deterministic drafts
  int32_t fixed_draft = 0;
  bool resample_is_right = false;  // p(draft) = 0 with a one-hot q: the residual is p itself
};

std::vector<Case> cases() {
  return {
      // q puts mass where p has none (token 5) and too little where p has most.
      {"q differs, p has a zero", {0.35f, 0.25f, 0.2f, 0.1f, 0.1f, 0.0f}, {0.1f, 0.3f, 0.05f, 0.25f, 0.1f, 0.2f}},
      // q's support misses p's tokens 0 and 1 (top-k cut the draft's distribution there).
      {"q misses tokens", {0.3f, 0.2f, 0.2f, 0.1f, 0.1f, 0.1f}, {0.0f, 0.0f, 0.5f, 0.3f, 0.1f, 0.1f}},
      {"q is p", {0.3f, 0.2f, 0.2f, 0.1f, 0.1f, 0.1f}, {0.3f, 0.2f, 0.2f, 0.1f, 0.1f, 0.1f}},
      {"p nearly one-hot", {0.96f, 0.01f, 0.01f, 0.01f, 0.01f, 0.0f}, {0.2f, 0.2f, 0.2f, 0.2f, 0.1f, 0.1f}},
      // Prompt lookup: q one-hot at the draft; the draft likely, unlikely, impossible under p.
      {"lookup, likely draft", {0.5f, 0.2f, 0.1f, 0.1f, 0.05f, 0.05f}, {}, 0},
      {"lookup, unlikely draft", {0.5f, 0.2f, 0.1f, 0.1f, 0.05f, 0.05f}, {}, 4},
      {"lookup, impossible draft", {0.5f, 0.2f, 0.1f, 0.1f, 0.1f, 0.0f}, {}, 5, true},
  };
}

TEST(SpeculativeAccept, OutputIsDistributedAsTheTarget) {
  uint64_t seed = 11;
  for (const Case& c : cases()) {
    const Verdict v = check(kRule, c.p, c.q.empty() ? nullptr : &c.q, c.fixed_draft, seed++);
    EXPECT_TRUE(v.ok()) << c.name << ": chi-square " << v.chi_square << " (limit " << v.chi_square_limit << "), TV "
                        << v.tv << " (limit " << v.tv_limit << ")";
  }
}

TEST(SpeculativeAccept, WrongRulesFailTheSameCheck) {
  uint64_t seed = 11;
  for (const Case& c : cases()) {
    const std::vector<float>* q = c.q.empty() ? nullptr : &c.q;
    if (c.name != std::string("q is p")) {  // there every rule is right
      const Verdict always = check(kAlwaysAccept, c.p, q, c.fixed_draft, seed);
      EXPECT_FALSE(always.ok()) << c.name << ": always-accept passed (TV " << always.tv << ")";
      if (!c.resample_is_right) {
        const Verdict resample = check(kResampleFromP, c.p, q, c.fixed_draft, seed);
        EXPECT_FALSE(resample.ok()) << c.name << ": resample-from-p passed (TV " << resample.tv << ")";
      }
    }
    ++seed;
  }
}

TEST(SpeculativeAccept, RejectionNeverReturnsTheDraftAndAcceptanceRateIsMinPOverQ) {
  // Deterministic properties: with p(x) = 0 the draft is never kept; with p(x) >= q(x) always.
  const std::vector<float> p = {0.5f, 0.3f, 0.2f, 0.0f};
  const std::vector<float> q = {0.25f, 0.25f, 0.25f, 0.25f};
  Rng rng(3);
  int kept_2 = 0;
  for (int t = 0; t < 20000; ++t) {
    EXPECT_NE(speculative_accept(p.data(), q.data(), 4, 3, rng), 3);
    EXPECT_EQ(speculative_accept(p.data(), q.data(), 4, 0, rng), 0);
    kept_2 += speculative_accept(p.data(), q.data(), 4, 2, rng) == 2;
  }
  // Token 2 is kept with probability 0.2 / 0.25 = 0.8 (5 sigma of 20000 Bernoulli trials: 0.014).
  EXPECT_NEAR(kept_2 / 20000.0, 0.8, 0.015);
}

TEST(SamplerProbabilities, MatchWhatSampleDraws) {
  // probabilities() is the distribution sample() draws from, after temperature, top-k,
  // min-p and top-p: draw from sample() many times and compare.
  SamplerParams sp;
  sp.temperature = 0.7f;
  sp.top_k = 5;
  sp.top_p = 0.9f;
  sp.min_p = 0.05f;
  sp.seed = 5;
  const std::vector<float> logits = {1.0f, 2.5f, 0.3f, 2.0f, -1.0f, 1.8f, 0.0f, 2.2f};
  alignas(64) static uint8_t buffer[1 << 14];
  ArenaAllocator arena(buffer, sizeof buffer);
  Sampler s;
  ASSERT_EQ(s.init(8, arena), Error::Ok);
  ASSERT_EQ(s.configure(sp), Error::Ok);
  std::vector<float> p(8);
  s.probabilities(logits.data(), nullptr, 0, p.data());
  double sum = 0;
  for (float x : p) sum += x;
  EXPECT_NEAR(sum, 1.0, 1e-6);
  EXPECT_EQ(p[4], 0.0f);  // cut by top-k
  std::vector<double> counts(8, 0.0);
  for (int t = 0; t < kTrials; ++t) counts[s.sample(logits.data(), nullptr, 0)] += 1.0;
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_NEAR(counts[i] / kTrials, p[i], kSigmas * std::sqrt(p[i] * (1 - p[i]) / kTrials) + 1e-9) << i;
  }
  // Greedy: one-hot at the argmax.
  sp.temperature = 0.0f;
  ASSERT_EQ(s.configure(sp), Error::Ok);
  s.probabilities(logits.data(), nullptr, 0, p.data());
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(p[i], i == 1 ? 1.0f : 0.0f);
}

}  // namespace
}  // namespace tern
