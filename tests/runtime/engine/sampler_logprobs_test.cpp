// Sampler::log_probabilities on hand-made logits against probabilities written out by hand and
// a float64 log-softmax computed here: the temperature (greedy as 1), the penalties, banned
// tokens, ties, the cap of 20 alternatives, the tail cuts it ignores and the RNG it leaves alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "runtime/base/arena.h"
#include "runtime/engine/sampler.h"
#include "tests/support/sampler_fixture.h"

namespace tern {
namespace {

using testing::plain;
using testing::SamplerFixture;

// log softmax(logits / t) in float64; -inf stays -inf.
std::vector<double> log_softmax(const std::vector<double>& logits, double t) {
  double max = -INFINITY;
  for (double l : logits) max = std::max(max, l);
  double sum = 0.0;
  for (double l : logits) sum += std::exp((l - max) / t);
  std::vector<double> out;
  for (double l : logits) out.push_back(l == -INFINITY ? -INFINITY : (l - max) / t - std::log(sum));
  return out;
}

// Calls log_probabilities for `chosen` and checks it and the top `top_n` against `expected`
// (one log-probability per id): the finite ones, most likely first, ties by the lower id.
void expect_log_probabilities(Sampler& sampler, const std::vector<float>& logits, const int32_t* history,
                              size_t history_len, const std::vector<double>& expected, int32_t chosen, uint32_t top_n) {
  std::vector<int32_t> ranked;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (std::isfinite(expected[i])) ranked.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(ranked.begin(), ranked.end(), [&](int32_t a, int32_t b) { return expected[a] > expected[b]; });
  std::vector<TokenLogprob> top(top_n + 1, TokenLogprob{-7, 7.0f});
  uint32_t n_top = 12345;
  const float got = sampler.log_probabilities(logits.data(), history, history_len, chosen, top.data(), top_n, &n_top);
  if (expected[chosen] == -INFINITY) {
    EXPECT_EQ(got, -INFINITY);
  } else {
    EXPECT_NEAR(got, expected[chosen], 1e-5) << "chosen " << chosen;
  }
  const size_t n = std::min<size_t>({top_n, kMaxTopLogprobs, ranked.size()});
  ASSERT_EQ(n_top, n);
  for (size_t k = 0; k < n; ++k) {
    EXPECT_EQ(top[k].token, ranked[k]) << "rank " << k;
    EXPECT_NEAR(top[k].logprob, expected[ranked[k]], 1e-5) << "rank " << k;
  }
  EXPECT_EQ(top[top_n].token, -7) << "wrote past top_n";
}

TEST(SamplerLogprobs, TemperatureOneAndGreedyGiveTheLogSoftmax) {
  const std::vector<float> logits = {std::log(0.5f) + 3.0f, std::log(0.3f) + 3.0f, std::log(0.15f) + 3.0f,
                                     std::log(0.05f) + 3.0f};
  const std::vector<double> expected = {std::log(0.5), std::log(0.3), std::log(0.15), std::log(0.05)};
  for (float t : {1.0f, 0.0f}) {
    SamplerFixture f(4, plain(t));
    expect_log_probabilities(f.sampler, logits, nullptr, 0, expected, 2, 3);
    expect_log_probabilities(f.sampler, logits, nullptr, 0, expected, 3, 0);
  }
}

TEST(SamplerLogprobs, TemperatureSharpensTheDistribution) {
  // At t = 0.5 the probabilities go as p^2: 0.25, 0.09, 0.0225, 0.0025 over 0.365.
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  const std::vector<double> expected = {std::log(0.25 / 0.365), std::log(0.09 / 0.365), std::log(0.0225 / 0.365),
                                        std::log(0.0025 / 0.365)};
  SamplerFixture f(4, plain(0.5f));
  expect_log_probabilities(f.sampler, logits, nullptr, 0, expected, 1, 4);
}

TEST(SamplerLogprobs, PenaltiesApplyAsWhenSampling) {
  SamplerParams p = plain(0.8f);
  p.repeat_penalty = 1.5f;
  p.presence_penalty = 0.3f;
  p.frequency_penalty = 0.2f;
  p.repeat_last_n = 3;
  SamplerFixture f(5, p);
  const std::vector<float> logits = {2.0f, 1.0f, -1.0f, 0.5f, 0.0f};
  const int32_t history[] = {4, 0, 2, 2};  // the window is {0, 2, 2}: token 4 is older
  // 0: 2 / 1.5 - 0.2 - 0.3; 2: -1 * 1.5 - 2 * 0.2 - 0.3.
  const std::vector<double> penalized = {2.0 / 1.5 - 0.5, 1.0, -1.5 - 0.7, 0.5, 0.0};
  const std::vector<double> expected = log_softmax(penalized, 0.8);
  for (int32_t chosen = 0; chosen < 5; ++chosen)
    expect_log_probabilities(f.sampler, logits, history, 4, expected, chosen, 5);
  // The penalty counts are cleared after each call: the same call again gives the same.
  expect_log_probabilities(f.sampler, logits, history, 4, expected, 0, 2);
}

TEST(SamplerLogprobs, BannedTokensAreMinusInfinityAndNeverListed) {
  SamplerFixture f(5, plain(1.0f));
  const std::vector<float> logits = {1.0f, -INFINITY, 0.5f, -INFINITY, -2.0f};
  const std::vector<double> expected = log_softmax({1.0, -INFINITY, 0.5, -INFINITY, -2.0}, 1.0);
  expect_log_probabilities(f.sampler, logits, nullptr, 0, expected, 1, 5);  // 3 listed
  expect_log_probabilities(f.sampler, logits, nullptr, 0, expected, 4, 5);
  const std::vector<float> none(5, -INFINITY);
  uint32_t n_top = 9;
  TokenLogprob top[5];
  EXPECT_EQ(f.sampler.log_probabilities(none.data(), nullptr, 0, 0, top, 5, &n_top), -INFINITY);
  EXPECT_EQ(n_top, 0u);
}

TEST(SamplerLogprobs, TiesGoToTheLowerId) {
  SamplerFixture f(6, plain(1.0f));
  const std::vector<float> logits = {0.0f, 1.0f, 1.0f, 0.5f, 1.0f, 1.0f};
  const std::vector<double> expected = log_softmax({0.0, 1.0, 1.0, 0.5, 1.0, 1.0}, 1.0);
  expect_log_probabilities(f.sampler, logits, nullptr, 0, expected, 5, 3);  // 1, 2, 4
}

TEST(SamplerLogprobs, AtMostTwentyOverAWholeVocabularyWithoutTheTailCuts) {
  SamplerParams p = plain(0.7f);
  p.top_k = 5;  // top-k, top-p and min-p shape the draw, not the log-probabilities
  p.top_p = 0.5f;
  p.min_p = 0.2f;
  SamplerFixture f(3000, p);
  std::mt19937 rng(36);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(3000);
  for (float& l : logits) l = normal(rng);
  const float best = *std::max_element(logits.begin(), logits.end()) + 1.0f;
  logits[2000] = logits[1000] = logits[17] = best;  // a three-way tie at the top: 17, 1000, 2000
  std::vector<double> wide(logits.begin(), logits.end());
  const std::vector<double> expected = log_softmax(wide, 0.7);
  for (int32_t chosen : {0, 1000, 2000, 2999})
    expect_log_probabilities(f.sampler, logits, nullptr, 0, expected, chosen, 50);
  expect_log_probabilities(f.sampler, logits, nullptr, 0, expected, 17, 20);
  expect_log_probabilities(f.sampler, logits, nullptr, 0, expected, 17, 7);
}

TEST(SamplerLogprobs, DrawsNothingFromTheRng) {
  SamplerFixture a(50, plain(1.0f));
  SamplerFixture b(50, plain(1.0f));
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i));
  TokenLogprob top[kMaxTopLogprobs];
  for (int i = 0; i < 200; ++i) {
    const int32_t drawn = a.sampler.sample(logits.data(), nullptr, 0);
    (void)a.sampler.log_probabilities(logits.data(), nullptr, 0, drawn, top, kMaxTopLogprobs, nullptr);
    (void)a.sampler.log_probabilities(logits.data(), nullptr, 0, drawn, nullptr, 5, nullptr);
    ASSERT_EQ(drawn, b.sampler.sample(logits.data(), nullptr, 0)) << "draw " << i;
  }
}

}  // namespace
}  // namespace tern
