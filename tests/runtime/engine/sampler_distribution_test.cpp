// The sampler against the distribution sampler.h documents, computed here in float64 from the
// same logits: penalties, temperature, top-k, softmax over the top-k, min-p against the most
// likely token, top-p's shortest prefix (ties by the lower id), the survivors renormalized.
// On vocabularies past the sorted top-k (1,024) and up to LLaMA-3's 128,256, for every path
// the sampler takes (sorted top-k, a long top-k list, min-p alone, top-p alone and with min-p,
// the whole softmax, penalties), and on peaked, flat, tied and wide logits:
//   - probabilities() gives the reference: the same tokens, each within 1e-4 relative;
//   - seeded draws from sample() never leave the reference's tokens, and their frequencies
//     are within a total-variation bound of the reference (see tv_bound).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "runtime/base/arena.h"
#include "runtime/engine/sampler.h"
#include "runtime/engine/sampler_passes.h"

namespace tern {
namespace {

// The distribution, and how far its cuts are from flipping: the smallest relative gap between
// a kept or dropped token and the min-p floor, and between top-p and the running sums on
// either side of the cut. The sampler rounds in float; a case closer than 2e-6 proves nothing.
struct Reference {
  std::vector<double> p;
  double margin = INFINITY;
};

Reference reference(const std::vector<float>& logits, const std::vector<int32_t>& history, const SamplerParams& sp) {
  const size_t vocab = logits.size();
  std::vector<double> l(logits.begin(), logits.end());
  const bool penalize = sp.repeat_penalty != 1.0f || sp.presence_penalty != 0.0f || sp.frequency_penalty != 0.0f;
  if (penalize && sp.repeat_last_n > 0) {
    const size_t n = std::min(history.size(), static_cast<size_t>(sp.repeat_last_n));
    std::map<int32_t, int> count;
    for (size_t i = history.size() - n; i < history.size(); ++i) ++count[history[i]];
    for (const auto& [id, c] : count) {
      double& x = l[id];
      x = x > 0.0 ? x / sp.repeat_penalty : x * sp.repeat_penalty;
      x -= c * static_cast<double>(sp.frequency_penalty) + sp.presence_penalty;
    }
  }
  Reference ref;
  ref.p.assign(vocab, 0.0);
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  if (sp.temperature == 0.0f) {
    ref.p[order[0]] = 1.0;
    return ref;
  }
  size_t n = sp.top_k > 0 ? std::min(vocab, static_cast<size_t>(sp.top_k)) : vocab;
  while (n > 0 && l[order[n - 1]] == -INFINITY) --n;
  std::vector<double> p(n);
  double z = 0.0;
  for (size_t i = 0; i < n; ++i) z += p[i] = std::exp((l[order[i]] - l[order[0]]) / sp.temperature);
  for (double& x : p) x /= z;
  if (sp.min_p > 0.0f) {
    const double floor = sp.min_p * p[0];
    size_t keep = 1;
    while (keep < n && p[keep] >= floor) ++keep;
    if (keep > 1) ref.margin = std::min(ref.margin, (p[keep - 1] - floor) / floor);
    if (keep < n) ref.margin = std::min(ref.margin, (floor - p[keep]) / floor);
    n = keep;
  }
  if (sp.top_p < 1.0f) {
    double cumulative = 0.0;
    size_t keep = 0;
    while (keep < n) {
      const double before = cumulative;
      cumulative += p[keep++];
      if (cumulative >= sp.top_p) {
        ref.margin = std::min({ref.margin, cumulative - sp.top_p, sp.top_p - before});
        break;
      }
    }
    if (keep == n && cumulative < sp.top_p) ref.margin = std::min(ref.margin, sp.top_p - cumulative);
    n = keep;
  }
  double mass = 0.0;
  for (size_t i = 0; i < n; ++i) mass += p[i];
  for (size_t i = 0; i < n; ++i) ref.p[order[i]] = p[i] / mass;
  return ref;
}

struct SamplerWithArena {
  std::vector<uint8_t> memory;
  ArenaAllocator arena;
  Sampler sampler;
  SamplerWithArena(uint32_t vocab, const SamplerParams& p)
      : memory(Sampler::required_arena_bytes(vocab) + 4096), arena(memory.data(), memory.size()) {
    EXPECT_EQ(sampler.init(vocab, arena), Error::Ok);
    EXPECT_EQ(sampler.configure(p), Error::Ok);
  }
};

// The groups frequencies are compared over: each token of probability >= 1/256 alone, the
// rest of the reference's tokens in 16 groups by id. -1: outside the reference's tokens.
std::vector<int32_t> groups_of(const std::vector<double>& p, size_t* n_groups) {
  std::vector<int32_t> group(p.size(), -1);
  int32_t next = 16;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] >= 1.0 / 256) {
      group[i] = next++;
    } else if (p[i] > 0.0) {
      group[i] = static_cast<int32_t>(i % 16);
    }
  }
  *n_groups = static_cast<size_t>(next);
  return group;
}

// Total variation between N draws' group frequencies and the groups' probabilities q exceeds
// E[TV] + t with probability at most exp(-2 N t^2) (McDiarmid: one draw moves TV by <= 1/N),
// and E[TV] <= 1/2 Σ sqrt(q (1 - q) / N). t for 1e-6.
double tv_bound(const std::vector<double>& q, int draws) {
  double expected = 0.0;
  for (double x : q) expected += 0.5 * std::sqrt(x * (1.0 - x) / draws);
  return expected + std::sqrt(std::log(1e6) / (2.0 * draws));
}

struct Case {
  const char* name;
  SamplerParams params;
};

SamplerParams params(float t, int32_t top_k, float top_p, float min_p) {
  SamplerParams p;
  p.temperature = t;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.repeat_penalty = 1.0f;
  p.seed = 1234;
  return p;
}

std::vector<Case> cases() {
  SamplerParams penalties = params(0.8f, 0, 0.9f, 0.0f);
  penalties.repeat_penalty = 1.3f;
  penalties.frequency_penalty = 0.5f;
  penalties.presence_penalty = 0.4f;
  SamplerParams penalties_top_k = params(0.8f, 40, 0.95f, 0.05f);
  penalties_top_k.repeat_penalty = 1.3f;
  penalties_top_k.frequency_penalty = 0.5f;
  penalties_top_k.presence_penalty = 0.4f;
  return {
      {"default top-k 40", params(0.8f, 40, 0.95f, 0.05f)},
      {"top-k 1000 top-p", params(1.0f, 1000, 0.9f, 0.0f)},
      {"top-k 2000 list", params(0.7f, 2000, 0.97f, 0.001f)},
      {"top-p alone", params(0.8f, 0, 0.9f, 0.0f)},
      {"top-p 0.5 hot", params(1.5f, 0, 0.5f, 0.0f)},
      {"min-p alone", params(0.8f, 0, 1.0f, 0.02f)},
      {"top-p and min-p", params(0.9f, 0, 0.8f, 0.01f)},
      {"whole softmax", params(1.3f, 0, 1.0f, 0.0f)},
      {"penalties top-p", penalties},
      {"penalties top-k", penalties_top_k},
  };
}

struct Shape {
  std::string name;
  std::vector<float> logits;
  std::vector<int32_t> history;  // 64 tokens, the likeliest among them
};

// A trained model's shape: a Zipf-like head of `head` random ids over a normal body.
Shape peaked(size_t vocab, size_t head, uint32_t seed) {
  Shape s{"peaked " + std::to_string(vocab), std::vector<float>(vocab), {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> body(-2.0f, 2.0f);
  for (float& l : s.logits) l = body(rng);
  std::vector<int32_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  for (size_t r = 0; r < head; ++r) s.logits[ids[r]] = 12.0f - 1.6f * std::log(static_cast<float>(r + 1));
  for (size_t i = 0; i < 64; ++i) s.history.push_back(ids[i % 8 == 0 ? i / 8 : 100 + i]);
  return s;
}

Shape normal(size_t vocab, float sd, uint32_t seed) {
  Shape s{"normal " + std::to_string(vocab), std::vector<float>(vocab), {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sd);
  for (float& l : s.logits) l = dist(rng);
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return s.logits[a] > s.logits[b]; });
  for (size_t i = 0; i < 64; ++i) s.history.push_back(order[i % 2 == 0 ? i / 2 : 500 + i]);
  return s;
}

// Logits on a grid of 0.25, so that the cuts fall inside runs of equal logits; a third banned.
Shape tied(size_t vocab, uint32_t seed) {
  Shape s{"tied " + std::to_string(vocab), std::vector<float>(vocab), {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.5f);
  for (float& l : s.logits) l = std::round(dist(rng) * 4.0f) / 4.0f;
  for (size_t i = 0; i < vocab; i += 3) s.logits[i] = -INFINITY;
  for (size_t i = 0; i < 64; ++i) s.history.push_back(static_cast<int32_t>((i * 37) % vocab));
  return s;
}

// Under an emulator (TERN_SLOW_EMULATION, ~70x slower) a tenth of the draws: the bound widens
// with fewer draws, and the sampler has no CPU-specific code past the passes' bits, which
// WeightsAreTheSameBitsAtEveryIsaLevel checks in full.
int draws_here(int draws) { return std::getenv("TERN_SLOW_EMULATION") != nullptr ? draws / 10 : draws; }

void check(const Shape& shape, const Case& c, int draws) {
  draws = draws_here(draws);
  SCOPED_TRACE(shape.name + ", " + c.name);
  const uint32_t vocab = static_cast<uint32_t>(shape.logits.size());
  const Reference ref = reference(shape.logits, shape.history, c.params);
  ASSERT_GT(ref.margin, 2e-6) << "a cut too close to call in float: pick other logits";
  SamplerWithArena s(vocab, c.params);
  const int32_t* history = shape.history.data();
  const size_t history_len = shape.history.size();

  std::vector<float> probs(vocab);
  s.sampler.probabilities(shape.logits.data(), history, history_len, probs.data());
  size_t kept = 0;
  for (uint32_t i = 0; i < vocab; ++i) {
    if (ref.p[i] == 0.0) {
      ASSERT_EQ(probs[i], 0.0f) << "token " << i << " is outside the reference's " << kept;
    } else {
      ++kept;
      ASSERT_NEAR(probs[i], ref.p[i], 1e-4 * ref.p[i] + 1e-9) << "token " << i;
    }
  }

  size_t n_groups = 0;
  const std::vector<int32_t> group = groups_of(ref.p, &n_groups);
  std::vector<double> expected(n_groups, 0.0), seen(n_groups, 0.0);
  for (uint32_t i = 0; i < vocab; ++i) {
    if (group[i] >= 0) expected[group[i]] += ref.p[i];
  }
  for (int d = 0; d < draws; ++d) {
    const int32_t t = s.sampler.sample(shape.logits.data(), history, history_len);
    ASSERT_TRUE(t >= 0 && t < static_cast<int32_t>(vocab) && group[t] >= 0)
        << "draw " << d << ": token " << t << " is outside the reference's " << kept;
    seen[group[t]] += 1.0 / draws;
  }
  double tv = 0.0;
  for (size_t g = 0; g < n_groups; ++g) tv += 0.5 * std::fabs(seen[g] - expected[g]);
  EXPECT_LT(tv, tv_bound(expected, draws)) << kept << " tokens kept, " << n_groups << " groups";
}

TEST(SamplerDistribution, EveryPathDrawsTheDocumentedDistribution) {
  const std::vector<Shape> shapes = {peaked(5000, 60, 1), normal(20000, 2.5f, 2), normal(6000, 0.3f, 3), tied(5000, 4)};
  for (const Shape& shape : shapes)
    for (const Case& c : cases()) check(shape, c, 3000);
}

// LLaMA-3's vocabulary, fewer draws: the thresholds, the wide nucleus and the block walk at
// full size.
TEST(SamplerDistribution, LlamaThreeSizedVocabulary) {
  const std::vector<Shape> shapes = {peaked(128256, 2000, 8), normal(128256, 2.5f, 10)};
  for (const Shape& shape : shapes) {
    for (const Case& c : cases()) {
      const std::string name = c.name;  // the sorted path once, with top-k 40
      if (name == "top-k 1000 top-p" || name == "penalties top-k" || name == "top-p 0.5 hot") continue;
      check(shape, c, 600);
    }
  }
}

// probabilities() alone (no draws, so many cases): random vocabularies past the sorted top-k,
// logit spreads, ties, bans and parameters, so that each cut lands anywhere in its pass.
TEST(SamplerDistribution, ProbabilitiesMatchTheReferenceOnRandomCases) {
  std::mt19937 rng(11);
  auto uniform = [&](float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); };
  int checked = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const uint32_t vocab = std::uniform_int_distribution<uint32_t>(1025, 6000)(rng);
    std::vector<float> logits(vocab);
    std::normal_distribution<float> dist(0.0f, uniform(0.1f, 5.0f));
    const float grid = trial % 4 == 0 ? 0.5f : 0.0f;
    for (float& l : logits) {
      l = dist(rng);
      if (grid > 0.0f) l = std::round(l / grid) * grid;
      if (uniform(0.0f, 1.0f) < 0.1f) l = -INFINITY;
    }
    const int32_t top_ks[] = {0, 0, 0, 40, 1500, 3000};
    SamplerParams p = params(uniform(0.2f, 2.0f), top_ks[trial % 6], trial % 5 == 0 ? 1.0f : uniform(0.05f, 0.999f),
                             trial % 3 == 0 ? 0.0f : std::exp(uniform(-9.0f, -0.5f)));
    std::vector<int32_t> history(32);
    for (int32_t& t : history) t = std::uniform_int_distribution<int32_t>(0, static_cast<int32_t>(vocab) - 1)(rng);
    if (trial % 2 == 0) {
      p.repeat_penalty = uniform(0.8f, 1.5f);
      p.presence_penalty = uniform(-0.5f, 1.0f);
    }
    const Reference ref = reference(logits, history, p);
    if (!(ref.margin > 2e-6)) continue;  // too close to call in float
    SCOPED_TRACE("trial " + std::to_string(trial));
    SamplerWithArena s(vocab, p);
    std::vector<float> probs(vocab);
    s.sampler.probabilities(logits.data(), history.data(), history.size(), probs.data());
    for (uint32_t i = 0; i < vocab; ++i) {
      if (ref.p[i] == 0.0) {
        ASSERT_EQ(probs[i], 0.0f) << "token " << i;
      } else {
        ASSERT_NEAR(probs[i], ref.p[i], 1e-4 * ref.p[i] + 1e-9) << "token " << i;
      }
    }
    ++checked;
  }
  EXPECT_GT(checked, 350);
}

// The softmax's weights in AVX2 and AVX-512 (where the CPU has them) are the plain build's
// bits, sums included: the seeded draws do not depend on the machine.
TEST(SamplerDistribution, WeightsAreTheSameBitsAtEveryIsaLevel) {
  std::vector<float> logits(128256 + 7);
  std::mt19937 rng(12);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (float& l : logits) l = dist(rng);
  logits[5] = -INFINITY;
  const float max = sampler_passes::max_of(logits.data(), logits.size());
  std::vector<float> plain(logits.size()), other(logits.size());
  const double sum = sampler_passes::weights(0, logits.data(), logits.size(), max, 1.0f / 0.7f, plain.data());
  EXPECT_EQ(plain[5], 0.0f);
  for (uint8_t level = 1; level <= sampler_passes::weights_level(); ++level) {
    SCOPED_TRACE(static_cast<int>(level));
    EXPECT_EQ(sampler_passes::weights(level, logits.data(), logits.size(), max, 1.0f / 0.7f, other.data()), sum);
    EXPECT_EQ(std::memcmp(plain.data(), other.data(), plain.size() * sizeof(float)), 0);
  }
}

// Greedy is the first of the largest logits, wherever the tie falls in a vector of sixteen.
TEST(SamplerDistribution, GreedyTakesTheLowestIdOfTiesOnALargeVocabulary) {
  std::vector<float> logits(5000);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& l : logits) l = dist(rng);
  for (int32_t id : {4097, 1234, 4999, 1239}) logits[id] = 9.0f;
  SamplerWithArena s(5000, params(0.0f, 40, 0.95f, 0.05f));
  EXPECT_EQ(s.sampler.sample(logits.data(), nullptr, 0), 1234);
  logits[1234] = -INFINITY;
  EXPECT_EQ(s.sampler.sample(logits.data(), nullptr, 0), 1239);
  std::vector<float> probs(5000);
  s.sampler.probabilities(logits.data(), nullptr, 0, probs.data());
  EXPECT_EQ(probs[1239], 1.0f);
}

// Banned tokens are never drawn, on any path, even when only a handful remain.
TEST(SamplerDistribution, OnlyTheTokensLeftAreDrawn) {
  std::vector<float> logits(30000, -INFINITY);
  const std::vector<int32_t> left = {3, 17, 4096, 29999};
  for (size_t i = 0; i < left.size(); ++i) logits[left[i]] = static_cast<float>(i) * 0.1f;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    SamplerWithArena s(30000, c.params);
    std::vector<int> count(30000);
    for (int d = 0; d < 2000; ++d) ++count[s.sampler.sample(logits.data(), nullptr, 0)];
    int inside = 0;
    for (int32_t id : left) inside += count[id];
    EXPECT_EQ(inside, 2000);
  }
}

}  // namespace
}  // namespace tern
