// The memory planner on 2B-4T's shape: a budget decides the context, the minimum is stated;
// byte sizes as the CLIs and the C API take them.
#include <gtest/gtest.h>

#include <string>

#include "runtime/engine/memory_plan.h"

namespace tern {
namespace {

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

// An explicit context is a contract: a budget a byte short of it is BudgetTooSmall naming what
// the context needs and the budget given (it used to plan one position fewer), also at the
// plan's minimum (it used to plan 16); without context_exact the context still bends to fit.
TEST(MemoryPlan, AnExactContextNeverShrinks) {
  MemoryPlanRequest r;
  r.config = config_2b4t();
  r.resident_weight_bytes = size_t{1179} << 20;
  KvCacheSpec f16;
  f16.dense_type = KvType::F16;
  f16.profile.shape = kv_shape_of(r.config);
  r.kv = &f16;
  r.context_request = 256;
  r.context_exact = true;
  auto unlimited = plan_memory(r);
  ASSERT_TRUE(unlimited.ok());
  ASSERT_EQ(unlimited->context_tokens, 256u);
  const size_t needed = unlimited->total_bytes;
  r.budget_bytes = needed;
  ASSERT_TRUE(plan_memory(r).ok()) << last_error_message();
  EXPECT_EQ(plan_memory(r)->context_tokens, 256u);
  for (const uint64_t budget : {uint64_t{needed - 1}, uint64_t{unlimited->minimum_budget_bytes}}) {
    r.budget_bytes = budget;
    r.context_exact = true;
    auto refused = plan_memory(r);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error(), Error::BudgetTooSmall);
    const std::string why = last_error_message();
    EXPECT_NE(why.find(std::to_string(needed)), std::string::npos) << why;
    EXPECT_NE(why.find(std::to_string(budget)), std::string::npos) << why;
    r.context_exact = false;  // the planner's own choice: what fits
    auto bent = plan_memory(r);
    ASSERT_TRUE(bent.ok());
    EXPECT_LT(bent->context_tokens, 256u);
  }
}

TEST(MemoryPlan, WithoutAContextOrABudgetTheDefaultContextIsBounded) {
  ModelConfig c = config_2b4t();
  EXPECT_EQ(default_context_request(c, 0, 0), 4096u);  // the model's 4,096
  c.max_context = 2048;
  EXPECT_EQ(default_context_request(c, 0, 0), 2048u);
  c.max_context = 131072;
  EXPECT_EQ(default_context_request(c, 0, 0), 4096u);
  EXPECT_EQ(default_context_request(c, 0, 100000), 100000u);      // asked: exactly that
  EXPECT_EQ(default_context_request(c, size_t{2} << 30, 0), 0u);  // a budget: as many as fit
  c.embedding = true;
  EXPECT_EQ(default_context_request(c, 0, 0), 8192u);
  c.max_context = 512;
  EXPECT_EQ(default_context_request(c, 0, 0), 512u);
}

TEST(MemoryPlan, AutoGrammarMemoryIsTwoMiBAnd48BytesATokenInWhole64KiB) {
  EXPECT_EQ(auto_grammar_bytes(0), 0u);
  EXPECT_EQ(auto_grammar_bytes(2048), 34u * 65536);     // 2 MiB + 96 KiB -> 2.125 MiB
  EXPECT_EQ(auto_grammar_bytes(128256), 126u * 65536);  // 2 MiB + 6,156,288 bytes -> 7.875 MiB
  EXPECT_EQ(auto_grammar_bytes(65536 / 48 * 2), 34u * 65536);
  for (uint32_t n : {1u, 259u, 32002u, 151936u, 262144u}) {
    const size_t b = auto_grammar_bytes(n);
    EXPECT_EQ(b % 65536, 0u) << n;
    EXPECT_GE(b, (size_t{2} << 20) + 48 * n) << n;
    EXPECT_LT(b, (size_t{2} << 20) + 48 * n + 65536) << n;
  }
}

TEST(MemoryPlan, ParsesByteSizes) {
  EXPECT_EQ(*parse_byte_size("512M"), uint64_t{512} << 20);
  EXPECT_EQ(*parse_byte_size("1.5G"), uint64_t{3} << 29);
  EXPECT_EQ(*parse_byte_size("4096"), 4096u);
  EXPECT_EQ(*parse_byte_size("64KiB"), 65536u);
  EXPECT_EQ(*parse_byte_size("0.25K"), 256u);
  EXPECT_EQ(*parse_byte_size("2T"), uint64_t{2} << 40);
  EXPECT_EQ(*parse_byte_size("18446744073709551615"), UINT64_MAX);
  EXPECT_FALSE(parse_byte_size("12X").ok());
  EXPECT_FALSE(parse_byte_size("").ok());
  EXPECT_FALSE(parse_byte_size("-3M").ok());
}

// Fractions of a byte, signs, hex, exponents, spaces: refused, never 0 (= no limit) or a guess.
TEST(MemoryPlan, RefusesWhatIsNotAWholeByteCount) {
  for (const char* bad : {"0.5",
                          "0.9",
                          "1e-9",
                          "1e9",
                          "-0",
                          "+0",
                          "0x0",
                          "0x10M",
                          " 1G",
                          "1G ",
                          "1.5",
                          "0.3K",
                          "1.",
                          ".5G",
                          "1..5G",
                          "inf",
                          "nan",
                          "1.0000001G",
                          "18446744073709551616",
                          "17179869184G",
                          "1iB"}) {
    auto parsed = parse_byte_size(bad);
    EXPECT_FALSE(parsed.ok()) << "'" << bad << "' parsed as " << (parsed.ok() ? *parsed : 0);
  }
}

}  // namespace
}  // namespace tern
