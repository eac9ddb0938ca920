// kv_mode "auto" against a brute-force search: for budgets from too small to plenty and two
// contexts, every candidate mode is planned through tern_plan() (the planner's byte
// function), the ones that hold the context (the same context as with no budget) are kept,
// and the least KL estimated here from the bundle's recorded per-head sensitivities (ties:
// fewer KV bytes per token) must be the mode tern_plan({"auto"}) names and the mode a load
// with kv_mode "auto" reports; an uncalibrated bundle gets the most bits per element that
// holds the context; a budget no mode fits is refused with the context each would get.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "include/tern.h"
#include "runtime/model/bundle.h"
#include "schema/bundle_generated.h"
#include "tests/support/bundle_util.h"

namespace {

constexpr const char* kCalibrated = "tiny-austen-calibrated.tern";
constexpr const char* kPacked = "tiny-austen-packed.tern";

struct Candidate {
  std::string name;
  std::vector<uint8_t> key_bits, value_bits;  // per head; empty: exact (fp16)
};

// fp16, q8, q4, q3, q2 and every allocation the bundle records, with their per-head widths.
std::vector<Candidate> candidates(const tern::Bundle& b) {
  const tern::ModelConfig& c = b.config();
  const size_t heads = size_t{c.layers} * c.kv_heads;
  std::vector<Candidate> out{{"fp16", {}, {}}};
  for (uint8_t w : {8, 4, 3, 2})
    out.push_back({"q" + std::to_string(w), std::vector<uint8_t>(heads, w), std::vector<uint8_t>(heads, w)});
  if (const tern::schema::KvProfile* p = b.kv_profile(); p != nullptr && p->allocations() != nullptr) {
    for (const tern::schema::KvAllocation* a : *p->allocations()) {
      char name[32];
      std::snprintf(name, sizeof name, "adaptive:%g", static_cast<double>(a->average_bits()));
      out.push_back({name, std::vector<uint8_t>(a->key_bits()->begin(), a->key_bits()->end()),
                     std::vector<uint8_t>(a->value_bits()->begin(), a->value_bits()->end())});
    }
  }
  return out;
}

// Sum over heads of the recorded single-head KL at the head's widths (mean of key and value).
double estimated_kl(const tern::Bundle& b, const Candidate& m) {
  if (m.key_bits.empty()) return 0.0;
  const tern::schema::KvProfile* p = b.kv_profile();
  const uint32_t kv_heads = b.config().kv_heads;
  double total = 0;
  for (const tern::schema::KvHeadProfile* h : *p->heads()) {
    const size_t i = size_t{h->layer()} * kv_heads + h->kv_head();
    for (uint8_t width : {m.key_bits[i], m.value_bits[i]}) {
      if (width == 0) continue;  // exact head
      bool found = false;
      for (uint32_t k = 0; k < p->sensitivity_widths()->size(); ++k)
        if (p->sensitivity_widths()->Get(k) == width) total += 0.5 * h->sensitivity()->Get(k), found = true;
      EXPECT_TRUE(found) << m.name << " width " << int(width);
    }
  }
  return total;
}

tern_plan_row plan_one(const std::string& path, const char* mode, uint64_t budget, uint32_t ctx) {
  tern_model_params p = tern_model_default_params();
  p.memory_budget_bytes = budget;
  p.n_ctx = ctx;
  const char* modes[] = {mode};
  tern_plan_row row{};
  size_t count = 0;
  EXPECT_EQ(tern_plan(path.c_str(), &p, modes, 1, &row, 1, &count), TERN_OK) << tern_last_error_message();
  return row;
}

// The brute-force answer: "" when no candidate holds the context.
std::string expected_auto(const std::string& path, const tern::Bundle& b, bool calibrated, uint64_t budget,
                          uint32_t ctx) {
  std::string best;
  double best_key = std::numeric_limits<double>::infinity(), best_bytes = 0;
  for (const Candidate& m : candidates(b)) {
    const tern_plan_row unlimited = plan_one(path, m.name.c_str(), 0, ctx);
    const tern_plan_row fitted = plan_one(path, m.name.c_str(), budget, ctx);
    if (unlimited.status != TERN_OK || fitted.status != TERN_OK) continue;
    if (fitted.context_tokens != unlimited.context_tokens) continue;
    const double key = calibrated ? estimated_kl(b, m) : -fitted.kv_bytes_per_token;
    if (key < best_key || (key == best_key && fitted.kv_bytes_per_token < best_bytes)) {
      best = m.name, best_key = key, best_bytes = fitted.kv_bytes_per_token;
    }
  }
  return best;
}

void check_bundle(const char* name, bool calibrated) {
  const std::string path = tern::testing::bundle_path(name);
  auto opened = tern::Bundle::open(path.c_str());
  ASSERT_TRUE(opened.ok());
  const tern::Bundle& b = *opened;
  ASSERT_EQ(b.kv_profile() != nullptr, calibrated);
  const uint64_t least = plan_one(path, "fp16", 1, 0).minimum_budget_bytes;
  ASSERT_GT(least, 0u);
  std::vector<std::string> seen;
  for (uint32_t ctx : {512u, 256u}) {
    for (uint64_t budget = least - 512 * 1024; budget <= least + 3 * 512 * 1024; budget += 64 * 1024) {
      const std::string expected = expected_auto(path, b, calibrated, budget, ctx);
      const tern_plan_row row = plan_one(path, "auto", budget, ctx);
      if (expected.empty()) {
        EXPECT_EQ(row.status, TERN_BUDGET_TOO_SMALL) << budget << " " << row.kv_mode;
        continue;
      }
      ASSERT_EQ(row.status, TERN_OK) << budget << ": " << tern_last_error_message();
      EXPECT_EQ(std::string(row.kv_mode), expected) << "budget " << budget << ", context " << ctx;
      if (std::find(seen.begin(), seen.end(), expected) == seen.end()) {
        seen.push_back(expected);
        // A load with kv_mode "auto" reports the same mode and context.
        tern_model_params mp = tern_model_default_params();
        mp.memory_budget_bytes = budget;
        mp.n_ctx = ctx;
        mp.kv_mode = "auto";
        tern_model* model = nullptr;
        ASSERT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_OK) << tern_last_error_message();
        tern_memory_report r;
        ASSERT_EQ(tern_memory_report_get(model, &r), TERN_OK);
        EXPECT_STREQ(r.kv_mode, expected.c_str());
        EXPECT_EQ(r.context_tokens, row.context_tokens);
        EXPECT_LE(r.planned_total_bytes, budget);
        tern_model_free(model);
      }
    }
  }
  // The sweep reaches several answers, so the ranking is exercised, not only fp16.
  EXPECT_GE(seen.size(), 2u) << name;
}

TEST(KvAuto, CalibratedBundlePicksTheLeastEstimatedKlThatHoldsTheContext) {
  TERN_REQUIRE_BUNDLE(kCalibrated);
  check_bundle(kCalibrated, true);
}

TEST(KvAuto, UncalibratedBundlePicksTheMostBitsThatHoldTheContext) {
  TERN_REQUIRE_BUNDLE(kPacked);
  check_bundle(kPacked, false);
}

TEST(KvAuto, NoModeFitsSaysWhatEachWouldHold) {
  TERN_REQUIRE_BUNDLE(kCalibrated);
  const std::string path = tern::testing::bundle_path(kCalibrated);
  const uint64_t least = plan_one(path, "fp16", 1, 0).minimum_budget_bytes;
  tern_model_params mp = tern_model_default_params();
  mp.memory_budget_bytes = least + 64 * 1024;  // fp16 fits a little, no mode the whole context
  mp.n_ctx = 512;
  mp.kv_mode = "auto";
  tern_model* model = nullptr;
  ASSERT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_BUDGET_TOO_SMALL);
  const std::string message = tern_last_error_message();
  EXPECT_NE(message.find("no mode holds 512 tokens"), std::string::npos) << message;
  // What fp16 holds in the budget: its automatic context (512 asked for is refused outright).
  const tern_plan_row fp16 = plan_one(path, "fp16", mp.memory_budget_bytes, 0);
  ASSERT_EQ(fp16.status, TERN_OK);
  EXPECT_NE(message.find("fp16 " + std::to_string(fp16.context_tokens)), std::string::npos) << message;
  EXPECT_NE(message.find("adaptive:"), std::string::npos) << message;
  // "auto" is a load-time choice: the mode parser names it, nothing else accepts it.
  mp.memory_budget_bytes = 0;
  mp.kv_mode = "automatic";
  EXPECT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tern_last_error_message()).find("auto"), std::string::npos);
}

}  // namespace
