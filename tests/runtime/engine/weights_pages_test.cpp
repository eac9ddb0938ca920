// tern_model_params.weights_pages on tiny-austen: a wrong name is refused, naming the choices;
// "auto" and "copy" run the very logits the plain mapping ("map") gives; the plan counts the
// copy as anonymous memory, with the budget arithmetic of the mapping it replaces; and the
// report says what the load did and what the kernel maps now.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <string>
#include <vector>

#include "include/tern.h"
#include "runtime/engine/model.h"
#include "runtime/model/bundle.h"
#include "tests/support/bundle_util.h"
#include "tests/support/large_pages_probe.h"

namespace {

constexpr const char* kBundle = "tiny-austen-packed.tern";
constexpr const char* kPrompt = "It is a truth universally acknowledged, that a single man in possession of a good";

std::string bundle() { return tern::testing::bundle_path(kBundle); }

uint64_t file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

tern_model_params params_with(const char* pages) {
  tern_model_params mp = tern_model_default_params();
  mp.n_ctx = 128;
  mp.weights_pages = pages;
  return mp;
}

// The logits after the prompt and after each of 8 greedy tokens, one after the other.
std::vector<float> logits_of(tern_model* model) {
  tern_session_params sp = tern_session_default_params();
  sp.sampler.temperature = 0.0f;
  tern_session* session = nullptr;
  EXPECT_EQ(tern_session_create(model, &sp, &session), TERN_OK) << tern_last_error_message();
  if (session == nullptr) return {};
  int32_t tokens[64];
  size_t n = 0;
  EXPECT_EQ(tern_tokenize(model, kPrompt, std::strlen(kPrompt), 1, 0, tokens, 64, &n), TERN_OK);
  EXPECT_EQ(tern_prefill(session, tokens, n), TERN_OK) << tern_last_error_message();
  std::vector<float> all;
  for (int step = 0; step <= 8; ++step) {
    const float* logits = nullptr;
    size_t vocab = 0;
    EXPECT_EQ(tern_get_logits(session, &logits, &vocab), TERN_OK);
    all.insert(all.end(), logits, logits + vocab);
    int32_t next = 0;
    EXPECT_EQ(tern_sample(session, &next), TERN_OK);
    if (step < 8) {
      EXPECT_EQ(tern_decode(session, next), TERN_OK);
    }
  }
  tern_session_free(session);
  return all;
}

TEST(WeightsPages, AnUnknownNameIsRefusedNamingTheChoices) {
  TERN_REQUIRE_BUNDLE(kBundle);
  for (const char* bad : {"huge", "Copy", "auto "}) {
    tern_model_params mp = params_with(bad);
    tern_model* model = nullptr;
    EXPECT_EQ(tern_model_load(bundle().c_str(), &mp, &model), TERN_INVALID_ARGUMENT) << bad;
    EXPECT_EQ(model, nullptr);
    const std::string why = tern_last_error_message();
    EXPECT_NE(why.find(std::string("weights_pages '") + bad + "'"), std::string::npos) << why;
    EXPECT_NE(why.find("auto, map or copy"), std::string::npos) << why;
    tern_plan_row row;
    size_t count = 0;
    const char* mode = "fp16";
    EXPECT_EQ(tern_plan(bundle().c_str(), &mp, &mode, 1, &row, 1, &count), TERN_INVALID_ARGUMENT) << bad;
  }
}

TEST(WeightsPages, AutoAndCopyRunTheLogitsOfTheMapping) {
  TERN_REQUIRE_BUNDLE(kBundle);
  std::vector<float> reference;
  const char* const modes[] = {"map", "auto", nullptr, "copy"};
  for (const char* pages : modes) {
    const std::string name = pages == nullptr ? "NULL" : pages;
    tern_model_params mp = params_with(pages);
    tern_model* model = nullptr;
    const tern_status s = tern_model_load(bundle().c_str(), &mp, &model);
    if (s == TERN_NOT_SUPPORTED && name == "copy") {
      std::printf("copy: %s\n", tern_last_error_message());
      continue;  // no transparent huge pages here: refused, as documented
    }
    ASSERT_EQ(s, TERN_OK) << name << ": " << tern_last_error_message();
    const std::vector<float> logits = logits_of(model);
    tern_weights_pages w;
    ASSERT_EQ(tern_model_weights_pages(model, &w), TERN_OK);
    tern_model_free(model);
    ASSERT_FALSE(logits.empty());
    if (reference.empty()) {
      reference = logits;
    } else {
      ASSERT_EQ(logits.size(), reference.size());
      EXPECT_EQ(std::memcmp(logits.data(), reference.data(), logits.size() * sizeof(float)), 0) << name;
    }
    EXPECT_STREQ(w.mode, pages == nullptr ? "auto" : pages);
    EXPECT_EQ(w.mapped, 1);
    EXPECT_EQ(w.bytes, file_size(bundle()));
    EXPECT_EQ(w.anonymous, name == "copy" ? 1 : 0) << name;
    if (name == "map") {
      EXPECT_STREQ(w.load, "not tried");
    }
    if (name == "copy") {
      EXPECT_STREQ(w.load, "copied");
    }
#if defined(__linux__)
    ASSERT_EQ(w.known, 1) << name;
    EXPECT_LE(w.large_bytes, w.bytes);
    // The bundle holds one whole large page: the copy and a file read in large pages map it so.
    const bool large_expected = (name == "copy" && tern::testing::anonymous_large_pages_given()) ||
                                std::strcmp(w.load, "as read") == 0 || std::strcmp(w.load, "re-read") == 0 ||
                                std::strcmp(w.load, "collapsed") == 0;
    if (large_expected && w.large_page_bytes > 0 && w.bytes >= w.large_page_bytes) {
      EXPECT_GE(w.large_bytes, w.large_page_bytes) << name << " (" << w.load << ")";
    }
    if (name != "map") {
      EXPECT_EQ(w.resident_bytes, w.bytes) << name << ": read in at load";
    }
#endif
  }
}

TEST(WeightsPages, ThePlanCountsTheCopyAsAnonymousMemory) {
  TERN_REQUIRE_BUNDLE(kBundle);
  const uint64_t size = file_size(bundle());
  auto opened = tern::Bundle::open(bundle().c_str());
  ASSERT_TRUE(opened.ok()) << tern::last_error_message();
  tern::ModelParams p;
  p.context_tokens = 128;
  p.weights_pages = "map";
  auto mapped = tern::plan_model(*opened, p);
  p.weights_pages = "copy";
  auto copied = tern::plan_model(*opened, p);
  ASSERT_TRUE(mapped.ok() && copied.ok()) << tern::last_error_message();
  EXPECT_EQ(mapped->resident_weight_bytes, size);
  EXPECT_EQ(mapped->anonymous_weight_bytes, 0u);
  EXPECT_EQ(copied->resident_weight_bytes, 0u);
  EXPECT_EQ(copied->anonymous_weight_bytes, size);
  // The same bytes, in another kind of memory: the same budget.
  EXPECT_EQ(copied->total_bytes, mapped->total_bytes);
  EXPECT_EQ(copied->minimum_budget_bytes, mapped->minimum_budget_bytes);

  // Through the C API: the plan row and the loaded model's report say the same, and a budget
  // a byte short of the minimum is refused naming the copy.
  tern_model_params mp = params_with("copy");
  mp.n_ctx = 0;
  tern_plan_row row;
  size_t count = 0;
  const char* mode = "fp16";
  ASSERT_EQ(tern_plan(bundle().c_str(), &mp, &mode, 1, &row, 1, &count), TERN_OK) << tern_last_error_message();
  ASSERT_EQ(row.status, TERN_OK);
  EXPECT_EQ(row.weights_bytes, size);
  mp.memory_budget_bytes = row.minimum_budget_bytes - 1;
  tern_model* model = nullptr;
  ASSERT_EQ(tern_model_load(bundle().c_str(), &mp, &model), TERN_BUDGET_TOO_SMALL);
  EXPECT_NE(std::string(tern_last_error_message()).find("copied into anonymous memory"), std::string::npos)
      << tern_last_error_message();
  mp.memory_budget_bytes = row.minimum_budget_bytes;
  const tern_status s = tern_model_load(bundle().c_str(), &mp, &model);
  if (s == TERN_NOT_SUPPORTED) GTEST_SKIP() << tern_last_error_message();
  ASSERT_EQ(s, TERN_OK) << tern_last_error_message();
  tern_memory_report r;
  ASSERT_EQ(tern_memory_report_get(model, &r), TERN_OK);
  EXPECT_EQ(r.weights_bytes, size);
  EXPECT_EQ(r.planned_total_bytes, row.minimum_budget_bytes);
  tern_model_free(model);
}

}  // namespace
