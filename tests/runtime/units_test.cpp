// Building blocks against hand-computed expectations and naive references: sampler, KV
// cache, memory plan, RoPE and RMSNorm.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdlib>
#include <vector>

#include "runtime/arena.h"
#include "runtime/forward.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/memory_plan.h"
#include "runtime/sampler.h"

namespace tern {
namespace {

struct SamplerFixture {
  std::vector<uint8_t> memory = std::vector<uint8_t>(1 << 16);
  ArenaAllocator arena{memory.data(), memory.size()};
  Sampler sampler;
  explicit SamplerFixture(uint32_t vocab, const SamplerParams& p) {
    EXPECT_EQ(sampler.init(vocab, arena), Error::Ok);
    EXPECT_EQ(sampler.configure(p), Error::Ok);
  }
};

SamplerParams plain(float temperature) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  return p;
}

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

class KvCacheTypes : public ::testing::TestWithParam<KvType> {};

void rows_round_trip(KvType type, uint32_t tokens) {
  SCOPED_TRACE(tokens);
  const KvShape shape{3, 2, 8};
  std::vector<uint8_t> memory(dense_kv_arena_bytes(type, shape, tokens));
  ArenaAllocator arena(memory.data(), memory.size());
  auto kv = create_dense_kv_cache(type, shape, tokens, arena);
  ASSERT_TRUE(kv.ok()) << last_error_message();
  EXPECT_EQ((*kv)->capacity_tokens(), tokens);
  auto value = [](uint32_t l, uint32_t h, uint32_t p, uint32_t i, bool is_key) {
    return (is_key ? 1.0f : -1.0f) * (1.0f + l * 0.25f + h * 0.125f + p * 0.0625f + i / 64.0f);
  };
  for (uint32_t l = 0; l < 3; ++l)
    for (uint32_t h = 0; h < 2; ++h)
      for (uint32_t p = 0; p < tokens; ++p) {
        float k[8], v[8];
        for (uint32_t i = 0; i < 8; ++i) k[i] = value(l, h, p, i, true), v[i] = value(l, h, p, i, false);
        ASSERT_EQ((*kv)->write(l, h, p, k, v), Error::Ok);
      }
  const float tolerance = type == KvType::F32 ? 0.0f : 2e-3f;  // 11-bit mantissa
  for (uint32_t l = 0; l < 3; ++l)
    for (uint32_t h = 0; h < 2; ++h) {
      std::vector<float> k(tokens * 8), v(tokens * 8);
      (*kv)->read_keys(l, h, 0, tokens, k.data());
      (*kv)->read_values(l, h, 1, tokens - 1, v.data());
      for (uint32_t p = 0; p < tokens; ++p)
        for (uint32_t i = 0; i < 8; ++i) {
          EXPECT_NEAR(k[p * 8 + i], value(l, h, p, i, true), tolerance);
          if (p > 0) {
            EXPECT_NEAR(v[(p - 1) * 8 + i], value(l, h, p, i, false), tolerance);
          }
        }
    }
}

// 5 positions: rows only; 21: two element-major key blocks of 8 and 5 rows (kv_key_index).
TEST_P(KvCacheTypes, RowsRoundTripWithoutOverlap) {
  for (uint32_t tokens : {5u, 21u}) rows_round_trip(GetParam(), tokens);
}

// The byte function grows by exactly the per-token bytes, and writing past the capacity
// is refused rather than overrunning the storage.
TEST_P(KvCacheTypes, BytesPerTokenAndCapacity) {
  const KvShape shape{30, 5, 128};
  const size_t per_token = 30u * 5 * 128 * 2 * (GetParam() == KvType::F32 ? 4 : 2);
  EXPECT_EQ(dense_kv_bytes_per_token(GetParam(), shape), per_token);
  EXPECT_EQ(dense_kv_arena_bytes(GetParam(), shape, 101) - dense_kv_arena_bytes(GetParam(), shape, 100), per_token);
  const KvShape small{1, 1, 8};
  std::vector<uint8_t> memory(dense_kv_arena_bytes(GetParam(), small, 4));
  ArenaAllocator arena(memory.data(), memory.size());
  auto kv = create_dense_kv_cache(GetParam(), small, 4, arena);
  ASSERT_TRUE(kv.ok()) << last_error_message();
  const float row[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  for (uint32_t p = 0; p < 4; ++p) EXPECT_EQ((*kv)->write(0, 0, p, row, row), Error::Ok);
  EXPECT_EQ((*kv)->write(0, 0, 4, row, row), Error::ContextFull);
  EXPECT_FALSE((*kv)->evicting());
}

INSTANTIATE_TEST_SUITE_P(Types, KvCacheTypes, ::testing::Values(KvType::F16, KvType::F32),
                         [](const ::testing::TestParamInfo<KvType>& info) { return to_string(info.param); });

ModelConfig config_2b4t() {
  ModelConfig c;
  c.family = ModelFamily::Bitnet2B4T;
  c.hidden = 2560;
  c.ffn_hidden = 6912;
  c.layers = 30;
  c.heads = 20;
  c.kv_heads = 5;
  c.head_dim = 128;
  c.vocab = 128256;
  c.max_context = 4096;
  return c;
}

TEST(MemoryPlan, BudgetDecidesTheContextAndTheMinimumIsStated) {
  MemoryPlanRequest r;
  r.config = config_2b4t();
  r.resident_weight_bytes = size_t{1179} << 20;
  r.tokenizer_bytes = size_t{8} << 20;
  KvCacheSpec f16;
  f16.dense_type = KvType::F16;
  f16.profile.shape = kv_shape_of(r.config);
  r.kv = &f16;
  r.budget_bytes = size_t{1} << 30;  // less than the weights
  auto refused = plan_memory(r);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error(), Error::BudgetTooSmall);
  EXPECT_NE(std::string(last_error_message()).find("at least"), std::string::npos);

  r.budget_bytes = 0;
  auto unlimited = plan_memory(r);
  ASSERT_TRUE(unlimited.ok());
  EXPECT_EQ(unlimited->context_tokens, 4096u);
  const size_t minimum = unlimited->minimum_budget_bytes;

  r.budget_bytes = minimum;
  auto at_minimum = plan_memory(r);
  ASSERT_TRUE(at_minimum.ok());
  EXPECT_EQ(at_minimum->context_tokens, kMinContextTokens);
  EXPECT_LE(at_minimum->total_bytes, minimum);

  // 100 MiB more: f16 KV costs 30*5*128*2*2 = 76800 bytes a token, plus attention scratch.
  r.budget_bytes = minimum + (size_t{100} << 20);
  auto more = plan_memory(r);
  ASSERT_TRUE(more.ok());
  EXPECT_LE(more->total_bytes, r.budget_bytes);
  EXPECT_GT(more->context_tokens, 1200u);
  EXPECT_LT(more->context_tokens, 1400u);
  r.budget_bytes = more->total_bytes + 100;  // a few bytes short of one more token
  EXPECT_EQ(plan_memory(r)->context_tokens, more->context_tokens);
}

TEST(MemoryPlan, ParsesByteSizes) {
  EXPECT_EQ(*parse_byte_size("512M"), uint64_t{512} << 20);
  EXPECT_EQ(*parse_byte_size("1.5G"), uint64_t{3} << 29);
  EXPECT_EQ(*parse_byte_size("4096"), 4096u);
  EXPECT_EQ(*parse_byte_size("64KiB"), 65536u);
  EXPECT_FALSE(parse_byte_size("12X").ok());
  EXPECT_FALSE(parse_byte_size("").ok());
  EXPECT_FALSE(parse_byte_size("-3M").ok());
}

TEST(Rope, RotateHalfAndAdjacentPairsAreComplexRotations) {
  const size_t hd = 16, half = hd / 2;
  const float theta = 10000.0f;
  std::vector<float> inv(half), cs(half), sn(half);
  for (size_t i = 0; i < half; ++i) inv[i] = 1.0f / std::pow(theta, 2.0f * i / hd);
  const uint32_t pos = 37;
  rope_angles(inv.data(), half, pos, cs.data(), sn.data());
  std::vector<float> x(hd);
  for (size_t i = 0; i < hd; ++i) x[i] = std::sin(1.0f + i);
  std::vector<float> a = x, b = x;
  rope_rotate_half(a.data(), hd, cs.data(), sn.data());
  rope_adjacent_pairs(b.data(), hd, cs.data(), sn.data());
  for (size_t i = 0; i < half; ++i) {
    const double angle = pos * std::pow(static_cast<double>(theta), -2.0 * i / hd);
    const std::complex<double> r = std::polar(1.0, angle);
    const std::complex<double> half_pair = std::complex<double>(x[i], x[i + half]) * r;
    EXPECT_NEAR(a[i], half_pair.real(), 1e-4);
    EXPECT_NEAR(a[i + half], half_pair.imag(), 1e-4);
    const std::complex<double> adjacent = std::complex<double>(x[2 * i], x[2 * i + 1]) * r;
    EXPECT_NEAR(b[2 * i], adjacent.real(), 1e-4);
    EXPECT_NEAR(b[2 * i + 1], adjacent.imag(), 1e-4);
  }
}

TEST(Norms, RmsNormAndTheBitllamaNormMatchTheirFormulas) {
  const size_t n = 48;
  std::vector<float> x(n), w(n), out(n);
  double sq = 0.0;
  for (size_t i = 0; i < n; ++i) {
    x[i] = std::cos(0.3f * i) * 3.0f;
    w[i] = 0.5f + i / 100.0f;
    sq += static_cast<double>(x[i]) * x[i];
  }
  rms_norm(x.data(), w.data(), n, 1e-5f, out.data());
  const double inv = 1.0 / std::sqrt(sq / n + 1e-5);
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(out[i], x[i] * inv * w[i], 1e-5);
  bitllama_norm(x.data(), n, out.data());
  const double denom = std::sqrt(sq / n) * n;
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(out[i], x[i] / denom, 1e-7);
  std::vector<float> zeros(n, 0.0f);
  bitllama_norm(zeros.data(), n, out.data());
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace tern
