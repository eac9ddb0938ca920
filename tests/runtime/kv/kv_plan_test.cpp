// tern_plan() against real loads: the context it promises for a budget is the context a
// load with that budget gets, the budget it names for a context loads exactly that
// context, and its minimum budget loads while one byte less is refused.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "include/tern.h"
#include "tests/support/bundle_util.h"

namespace {

constexpr const char* kBundle = "tiny-austen-packed.tern";

// The budgets below are the KV cache's: no grammar memory (the default reserves some).
std::vector<tern_plan_row> plan(const std::string& path, uint64_t budget, uint32_t ctx) {
  tern_model_params p = tern_model_default_params();
  p.grammar_bytes = 0;
  p.memory_budget_bytes = budget;
  p.n_ctx = ctx;
  size_t count = 0;
  // No room: the count of modes (at least the four standard ones) and OUT_OF_RANGE.
  EXPECT_EQ(tern_plan(path.c_str(), &p, nullptr, 0, nullptr, 0, &count), TERN_OUT_OF_RANGE);
  EXPECT_GE(count, 4u);
  std::vector<tern_plan_row> rows(count);
  EXPECT_EQ(tern_plan(path.c_str(), &p, nullptr, 0, rows.data(), rows.size(), &count), TERN_OK)
      << tern_last_error_message();
  return rows;
}

// Loads `mode` at `budget` (n_ctx 0: the largest context that fits); returns the report.
tern_status load(const std::string& path, const char* mode, uint64_t budget, tern_memory_report* report) {
  tern_model_params mp = tern_model_default_params();
  mp.grammar_bytes = 0;
  mp.memory_budget_bytes = budget;
  mp.kv_mode = mode;
  tern_model* model = nullptr;
  const tern_status s = tern_model_load(path.c_str(), &mp, &model);
  if (s != TERN_OK) return s;
  tern_memory_report r;
  EXPECT_EQ(tern_memory_report_get(model, &r), TERN_OK);
  if (report != nullptr) *report = r;
  // A session fits in the planned arena.
  tern_session* session = nullptr;
  EXPECT_EQ(tern_session_create(model, nullptr, &session), TERN_OK) << mode << ": " << tern_last_error_message();
  EXPECT_EQ(tern_memory_report_get(model, &r), TERN_OK);
  EXPECT_LE(r.arena_used_bytes, r.arena_bytes);
  EXPECT_LE(r.planned_total_bytes, budget);
  tern_session_free(session);
  tern_model_free(model);
  return s;
}

TEST(KvPlan, DefaultModesAndRows) {
  TERN_REQUIRE_BUNDLE(kBundle);
  const std::string path = tern::testing::bundle_path(kBundle);
  const auto rows = plan(path, 0, 0);
  ASSERT_GE(rows.size(), 4u);
  EXPECT_STREQ(rows[0].kv_mode, "fp16");
  EXPECT_STREQ(rows[1].kv_mode, "q8");
  EXPECT_STREQ(rows[2].kv_mode, "q4");
  EXPECT_STREQ(rows[3].kv_mode, "q2");
  for (const auto& r : rows) {
    EXPECT_EQ(r.status, TERN_OK) << r.kv_mode;
    EXPECT_EQ(r.total_bytes, r.process_overhead_bytes + r.weights_bytes + r.arena_bytes) << r.kv_mode;
  }
  // Fewer bits, fewer bytes per token: 1536 (fp16), 864 (q8), 480 (q4), 288 (q2) for
  // 6 layers x 2 KV heads x 32 dims (KV.md's table).
  EXPECT_DOUBLE_EQ(rows[0].kv_bytes_per_token, 1536.0);
  EXPECT_DOUBLE_EQ(rows[1].kv_bytes_per_token, 864.0);
  EXPECT_DOUBLE_EQ(rows[2].kv_bytes_per_token, 480.0);
  EXPECT_DOUBLE_EQ(rows[3].kv_bytes_per_token, 288.0);

  tern_plan_row one{};
  size_t count = 0;
  EXPECT_EQ(tern_plan(path.c_str(), nullptr, nullptr, 0, &one, 1, &count), TERN_OUT_OF_RANGE);
  EXPECT_EQ(count, rows.size());
  EXPECT_STREQ(one.kv_mode, "fp16");
  EXPECT_EQ(tern_plan(nullptr, nullptr, nullptr, 0, &one, 1, &count), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(tern_plan(path.c_str(), nullptr, nullptr, 1, &one, 1, &count), TERN_INVALID_ARGUMENT);
  const char* bad[] = {"q5"};
  ASSERT_EQ(tern_plan(path.c_str(), nullptr, bad, 1, &one, 1, &count), TERN_OK);
  EXPECT_EQ(one.status, TERN_INVALID_ARGUMENT);
  // The load parameters are checked as tern_model_load checks them.
  tern_model_params p = tern_model_default_params();
  p.n_batch = 0;
  EXPECT_EQ(tern_plan(path.c_str(), &p, nullptr, 0, &one, 1, &count), TERN_INVALID_ARGUMENT);
}

TEST(KvPlan, BudgetRowsMatchRealLoads) {
  TERN_REQUIRE_BUNDLE(kBundle);
  const std::string path = tern::testing::bundle_path(kBundle);
  // 12.6 MiB: above every mode's minimum (compressed: 12.35 MiB for S + W + G = 68 positions
  // and a 64-token batch), below what fp16's full 512-token context needs.
  const uint64_t budget = uint64_t{126} * 1024 * 1024 / 10;
  const auto rows = plan(path, budget, 0);
  const auto bigger_ctx = [&](const tern_plan_row& row) {
    tern_model_params p = tern_model_default_params();
    p.grammar_bytes = 0;
    p.n_ctx = row.context_tokens + 1;
    const char* modes[] = {row.kv_mode};
    tern_plan_row out{};
    size_t count = 0;
    EXPECT_EQ(tern_plan(path.c_str(), &p, modes, 1, &out, 1, &count), TERN_OK);
    return out;
  };
  for (const auto& row : rows) {
    ASSERT_EQ(row.status, TERN_OK) << row.kv_mode << ": " << tern_last_error_message();
    tern_memory_report rep;
    ASSERT_EQ(load(path, row.kv_mode, budget, &rep), TERN_OK) << row.kv_mode << ": " << tern_last_error_message();
    EXPECT_EQ(rep.context_tokens, row.context_tokens) << row.kv_mode;
    EXPECT_EQ(rep.planned_total_bytes, row.total_bytes) << row.kv_mode;
    EXPECT_EQ(rep.minimum_budget_bytes, row.minimum_budget_bytes) << row.kv_mode;
    EXPECT_LE(row.total_bytes, budget);
    // The largest context: the next one the cache can have needs more than the budget
    // (unless the model's context is the limit: 512 dense, 484 = 4 + 13*32 + 64 compressed).
    if (row.context_tokens < (std::strcmp(row.kv_mode, "fp16") == 0 ? 512u : 484u)) {
      const tern_plan_row next = bigger_ctx(row);
      EXPECT_GT(next.context_tokens, row.context_tokens) << row.kv_mode;
      EXPECT_GT(next.total_bytes, budget) << row.kv_mode;
    }
    // The minimum loads; one byte less is refused with the minimum in the message.
    EXPECT_EQ(load(path, row.kv_mode, row.minimum_budget_bytes, nullptr), TERN_OK) << row.kv_mode;
    EXPECT_EQ(load(path, row.kv_mode, row.minimum_budget_bytes - 1, nullptr), TERN_BUDGET_TOO_SMALL) << row.kv_mode;
    EXPECT_NE(std::strstr(tern_last_error_message(), std::to_string(row.minimum_budget_bytes).c_str()), nullptr)
        << tern_last_error_message();
    std::printf("%-6s budget %llu: context %u, KV %llu bytes, %.1f bytes/token, minimum %llu\n", row.kv_mode,
                static_cast<unsigned long long>(budget), row.context_tokens,
                static_cast<unsigned long long>(row.kv_bytes), row.kv_bytes_per_token,
                static_cast<unsigned long long>(row.minimum_budget_bytes));
  }
}

TEST(KvPlan, ContextRowsNameTheBudgetThatHoldsIt) {
  TERN_REQUIRE_BUNDLE(kBundle);
  const std::string path = tern::testing::bundle_path(kBundle);
  for (const auto& row : plan(path, 0, 300)) {
    ASSERT_EQ(row.status, TERN_OK) << row.kv_mode;
    EXPECT_GE(row.context_tokens, 300u) << row.kv_mode;
    EXPECT_LT(row.context_tokens, 300u + 32) << row.kv_mode;
    tern_memory_report rep;
    ASSERT_EQ(load(path, row.kv_mode, row.total_bytes, &rep), TERN_OK) << row.kv_mode;
    EXPECT_EQ(rep.context_tokens, row.context_tokens) << row.kv_mode;
    // One byte less holds a smaller context.
    ASSERT_EQ(load(path, row.kv_mode, row.total_bytes - 1, &rep), TERN_OK) << row.kv_mode;
    EXPECT_LT(rep.context_tokens, row.context_tokens) << row.kv_mode;
  }
}

// A calibrated bundle: the default rows add adaptive:B for every average it holds, and each
// loads with exactly the capacity the planner promised.
TEST(KvPlan, AdaptiveRowsForEveryCalibratedAverage) {
  TERN_REQUIRE_BUNDLE("tiny-austen-calibrated.tern");
  const std::string path = tern::testing::bundle_path("tiny-austen-calibrated.tern");
  const uint64_t budget = uint64_t{126} * 1024 * 1024 / 10;
  const auto rows = plan(path, budget, 0);
  size_t adaptive = 0;
  for (const auto& row : rows) {
    if (std::strncmp(row.kv_mode, "adaptive:", 9) != 0) continue;
    ++adaptive;
    ASSERT_EQ(row.status, TERN_OK) << row.kv_mode;
    tern_memory_report rep;
    ASSERT_EQ(load(path, row.kv_mode, budget, &rep), TERN_OK) << row.kv_mode << ": " << tern_last_error_message();
    EXPECT_EQ(rep.context_tokens, row.context_tokens) << row.kv_mode;
    EXPECT_EQ(rep.planned_total_bytes, row.total_bytes) << row.kv_mode;
    EXPECT_EQ(rep.kv_compressed, 1);
  }
  EXPECT_GE(adaptive, 1u) << "no adaptive:B row for a calibrated bundle";
  // A mode the bundle does not hold is NotFound, naming the averages it has.
  tern_model_params mp = tern_model_default_params();
  mp.kv_mode = "adaptive:7.25";
  tern_model* model = nullptr;
  EXPECT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_NOT_FOUND);
  EXPECT_NE(std::strstr(tern_last_error_message(), "adaptive"), nullptr) << tern_last_error_message();
}

}  // namespace
