// The sampler against the distributions it promises: greedy ties, temperature 1 as the
// softmax, the tail cuts, seeds, the repetition penalty and argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/base/arena.h"
#include "runtime/engine/sampler.h"
#include "tests/support/sampler_fixture.h"

namespace tern {
namespace {

using testing::plain;
using testing::SamplerFixture;

std::vector<double> frequencies(SamplerFixture& f, const std::vector<float>& logits, int draws) {
  std::vector<double> counts(logits.size());
  for (int i = 0; i < draws; ++i) counts[f.sampler.sample(logits.data(), nullptr, 0)] += 1.0 / draws;
  return counts;
}

TEST(Sampler, GreedyTakesTheLargestLogitLowestIdOnTies) {
  SamplerFixture f(5, plain(0.0f));
  const std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f};
  EXPECT_EQ(f.sampler.sample(logits.data(), nullptr, 0), 1);
}

TEST(Sampler, TemperatureOneDrawsTheSoftmaxDistribution) {
  SamplerFixture f(3, plain(1.0f));
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  const auto freq = frequencies(f, logits, 20000);
  EXPECT_NEAR(freq[0], 0.5, 0.02);
  EXPECT_NEAR(freq[1], 0.3, 0.02);
  EXPECT_NEAR(freq[2], 0.2, 0.02);
}

TEST(Sampler, TopKTopPAndMinPCutTheTail) {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  {
    SamplerParams p = plain(1.0f);
    p.top_k = 2;  // renormalized 0.5 : 0.3
    SamplerFixture f(4, p);
    const auto freq = frequencies(f, logits, 20000);
    EXPECT_NEAR(freq[0], 0.625, 0.02);
    EXPECT_EQ(freq[2] + freq[3], 0.0);
  }
  {
    SamplerParams p = plain(1.0f);
    p.top_p = 0.9f;  // 0.5 + 0.3 + 0.15 reaches 0.9 at the third token
    SamplerFixture f(4, p);
    const auto freq = frequencies(f, logits, 20000);
    EXPECT_GT(freq[2], 0.1);
    EXPECT_EQ(freq[3], 0.0);
  }
  {
    SamplerParams p = plain(1.0f);
    p.min_p = 0.35f;  // floor 0.175: keeps 0.5 and 0.3
    SamplerFixture f(4, p);
    const auto freq = frequencies(f, logits, 20000);
    EXPECT_NEAR(freq[1], 0.375, 0.02);
    EXPECT_EQ(freq[2] + freq[3], 0.0);
  }
}

TEST(Sampler, SameSeedSameSequenceOtherSeedOtherSequence) {
  const std::vector<float> logits(64, 0.0f);
  SamplerParams p = plain(1.0f);
  p.seed = 42;
  SamplerFixture a(64, p), b(64, p);
  p.seed = 43;
  SamplerFixture c(64, p);
  int same_ab = 0, same_ac = 0;
  for (int i = 0; i < 100; ++i) {
    const int32_t x = a.sampler.sample(logits.data(), nullptr, 0);
    same_ab += x == b.sampler.sample(logits.data(), nullptr, 0);
    same_ac += x == c.sampler.sample(logits.data(), nullptr, 0);
  }
  EXPECT_EQ(same_ab, 100);
  EXPECT_LT(same_ac, 20);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplerParams p = plain(0.0f);
  p.repeat_penalty = 1.2f;
  SamplerFixture f(3, p);
  const std::vector<float> logits = {2.0f, 1.9f, -5.0f};
  const int32_t history[] = {0, 0};
  EXPECT_EQ(f.sampler.sample(logits.data(), history, 2), 1);  // 2.0 / 1.2 < 1.9
  const std::vector<float> negative = {-1.0f, -1.1f, -5.0f};
  EXPECT_EQ(f.sampler.sample(negative.data(), history, 2), 1);  // -1.2 < -1.1
  EXPECT_EQ(f.sampler.sample(negative.data(), nullptr, 0), 0);
}

TEST(Sampler, InvalidParamsAreRejected) {
  SamplerParams p;
  p.temperature = NAN;
  EXPECT_EQ(validate(p), Error::InvalidArgument);
  p = SamplerParams{};
  p.top_p = 1.5f;
  EXPECT_EQ(validate(p), Error::InvalidArgument);
  p = SamplerParams{};
  p.repeat_last_n = -1;
  EXPECT_EQ(validate(p), Error::InvalidArgument);
  EXPECT_EQ(validate(SamplerParams{}), Error::Ok);
}

}  // namespace
}  // namespace tern
