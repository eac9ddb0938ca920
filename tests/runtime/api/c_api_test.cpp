// Bad input through the C API: every failure is a tern_status with a message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "include/tern.h"
#include "platform/error.h"
#include "tests/support/bundle_util.h"

namespace {

constexpr const char* kBundle = "tiny-austen-packed.tern";

std::string message() { return tern_last_error_message(); }

TEST(CApi, StatusValuesAndNamesFollowTheErrorList) {
  EXPECT_EQ(TERN_OK, 0);
  EXPECT_EQ(static_cast<int>(TERN_BUDGET_TOO_SMALL), static_cast<int>(tern::Error::BudgetTooSmall));
  EXPECT_STREQ(tern_status_string(TERN_PROMPT_TOO_LONG), "PROMPT_TOO_LONG");
  EXPECT_STREQ(tern_status_string(static_cast<tern_status>(0x7777)), "UNKNOWN");
}

TEST(CApi, NullHandlesAndOutputsAreInvalidArguments) {
  tern_model* model = reinterpret_cast<tern_model*>(0x1);
  EXPECT_EQ(tern_model_load(nullptr, nullptr, &model), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(model, nullptr);  // cleared even on failure
  EXPECT_NE(message().find("path"), std::string::npos) << message();
  EXPECT_EQ(tern_model_load("x.tern", nullptr, nullptr), TERN_INVALID_ARGUMENT);
  tern_session* session = nullptr;
  EXPECT_EQ(tern_session_create(nullptr, nullptr, &session), TERN_INVALID_ARGUMENT);
  EXPECT_NE(message().find("model is NULL"), std::string::npos) << message();
  EXPECT_EQ(tern_prefill(nullptr, nullptr, 0), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(tern_decode(nullptr, 1), TERN_INVALID_ARGUMENT);
  int32_t token = 0;
  EXPECT_EQ(tern_sample(nullptr, &token), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(tern_generate(nullptr, "x", 1, nullptr, nullptr, nullptr, nullptr), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(tern_session_reset(nullptr), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(tern_session_request_abort(nullptr), TERN_INVALID_ARGUMENT);
  tern_memory_report report;
  EXPECT_EQ(tern_memory_report_get(nullptr, &report), TERN_INVALID_ARGUMENT);
  size_t count = 0;
  EXPECT_EQ(tern_tokenize(nullptr, "a", 1, 1, 0, nullptr, 0, &count), TERN_INVALID_ARGUMENT);
  tern_session_free(nullptr);  // no-ops
  tern_model_free(nullptr);
}

TEST(CApi, MissingAndCorruptBundlesFail) {
  tern_model* model = nullptr;
  const tern_status missing = tern_model_load("/nonexistent/dir/model.tern", nullptr, &model);
  EXPECT_TRUE(missing == TERN_FILE_NOT_FOUND || missing == TERN_IO_ERROR) << tern_status_string(missing);
  EXPECT_NE(message().find("/nonexistent/dir/model.tern"), std::string::npos) << message();

  tern::testing::TempFile junk(".tern");
  std::vector<uint8_t> bytes(4096);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  junk.write(bytes);
  EXPECT_NE(tern_model_load(junk.path().c_str(), nullptr, &model), TERN_OK);
  EXPECT_EQ(model, nullptr);
  EXPECT_FALSE(message().empty());

  TERN_REQUIRE_BUNDLE(kBundle);
  // A real bundle cut in half.
  std::vector<uint8_t> real = tern::testing::read_file_bytes(tern::testing::bundle_path(kBundle));
  real.resize(real.size() / 2);
  tern::testing::TempFile truncated(".tern");
  truncated.write(real);
  const tern_status cut = tern_model_load(truncated.path().c_str(), nullptr, &model);
  EXPECT_NE(cut, TERN_OK);
  EXPECT_EQ(model, nullptr);
  EXPECT_FALSE(message().empty()) << tern_status_string(cut);
}

class CApiWithModel : public ::testing::Test {
 protected:
  void SetUp() override {
    TERN_REQUIRE_BUNDLE(kBundle);
    tern_model_params mp = tern_model_default_params();
    mp.n_ctx = 32;
    ASSERT_EQ(tern_model_load(tern::testing::bundle_path(kBundle).c_str(), &mp, &model_), TERN_OK) << message();
    tern_session_params sp = tern_session_default_params();
    ASSERT_EQ(tern_session_create(model_, &sp, &session_), TERN_OK) << message();
  }
  void TearDown() override {
    tern_session_free(session_);
    tern_model_free(model_);
  }
  tern_model* model_ = nullptr;
  tern_session* session_ = nullptr;
};

TEST_F(CApiWithModel, PromptLongerThanTheContextIsRejectedNotTruncated) {
  std::vector<int32_t> tokens(33, 100);
  EXPECT_EQ(tern_prefill(session_, tokens.data(), tokens.size()), TERN_PROMPT_TOO_LONG);
  EXPECT_NE(message().find("32-token context"), std::string::npos) << message();
  uint32_t position = 7;
  ASSERT_EQ(tern_session_position(session_, &position), TERN_OK);
  EXPECT_EQ(position, 0u);  // nothing was run

  std::string prompt;
  for (int i = 0; i < 40; ++i) prompt += "Once upon a time ";
  EXPECT_EQ(tern_generate(session_, prompt.data(), prompt.size(), nullptr, nullptr, nullptr, nullptr),
            TERN_PROMPT_TOO_LONG);
  EXPECT_NE(message().find("prompt is"), std::string::npos) << message();

  // Exactly the context fits; one more decode does not.
  ASSERT_EQ(tern_prefill(session_, tokens.data(), 32), TERN_OK) << message();
  EXPECT_EQ(tern_decode(session_, 100), TERN_CONTEXT_FULL);
  EXPECT_FALSE(message().empty());
}

TEST_F(CApiWithModel, InvalidSamplerParamsAreRejected) {
  tern_sampler_params p = tern_sampler_default_params();
  p.temperature = -1.0f;
  EXPECT_EQ(tern_session_set_sampler(session_, &p), TERN_INVALID_ARGUMENT);
  EXPECT_NE(message().find("temperature"), std::string::npos) << message();
  p = tern_sampler_default_params();
  p.top_p = 0.0f;
  EXPECT_EQ(tern_session_set_sampler(session_, &p), TERN_INVALID_ARGUMENT);
  EXPECT_NE(message().find("top_p"), std::string::npos) << message();
  p = tern_sampler_default_params();
  p.top_k = -3;
  EXPECT_EQ(tern_session_set_sampler(session_, &p), TERN_INVALID_ARGUMENT);
  p = tern_sampler_default_params();
  p.min_p = 1.5f;
  EXPECT_EQ(tern_session_set_sampler(session_, &p), TERN_INVALID_ARGUMENT);
  p = tern_sampler_default_params();
  p.repeat_penalty = 0.0f;
  EXPECT_EQ(tern_session_set_sampler(session_, &p), TERN_INVALID_ARGUMENT);
  EXPECT_NE(message().find("repeat_penalty"), std::string::npos) << message();
  // Rejected at session creation too.
  tern_session_free(session_);
  session_ = nullptr;
  tern_session_params sp = tern_session_default_params();
  sp.sampler.temperature = -0.5f;
  EXPECT_EQ(tern_session_create(model_, &sp, &session_), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(session_, nullptr);
}

TEST_F(CApiWithModel, StateErrors) {
  int32_t token = 0;
  EXPECT_EQ(tern_sample(session_, &token), TERN_INVALID_STATE);  // no logits yet
  const float* logits = nullptr;
  EXPECT_EQ(tern_get_logits(session_, &logits, nullptr), TERN_INVALID_STATE);
  tern_session* second = nullptr;
  EXPECT_EQ(tern_session_create(model_, nullptr, &second), TERN_INVALID_STATE);
  EXPECT_NE(message().find("session slot of the model is in use"), std::string::npos) << message();
  EXPECT_EQ(tern_decode(session_, 100000), TERN_INVALID_TOKEN);
  EXPECT_EQ(tern_decode(session_, -1), TERN_INVALID_TOKEN);
  // Abort: requested before the call, the call stops; reset clears it.
  ASSERT_EQ(tern_session_request_abort(session_), TERN_OK);
  EXPECT_EQ(tern_decode(session_, 1), TERN_ABORTED);
  ASSERT_EQ(tern_session_reset(session_), TERN_OK);
  EXPECT_EQ(tern_decode(session_, 1), TERN_OK) << message();
  size_t vocab = 0;
  ASSERT_EQ(tern_get_logits(session_, &logits, &vocab), TERN_OK);
  EXPECT_EQ(vocab, 2048u);
}

TEST_F(CApiWithModel, MemoryReportAddsUp) {
  tern_memory_report r;
  ASSERT_EQ(tern_memory_report_get(model_, &r), TERN_OK);
  EXPECT_EQ(r.context_tokens, 32u);
  EXPECT_GT(r.arena_used_bytes, 0u);
  EXPECT_LE(r.arena_used_bytes, r.arena_bytes);
  EXPECT_GE(r.arena_used_bytes, r.arena_weights_bytes + r.arena_tokenizer_bytes + r.arena_scratch_bytes +
                                    r.arena_kv_cache_bytes + r.arena_sampler_bytes + r.arena_other_bytes);
  // 6 layers x 2 KV heads x 32 dims x (K + V) x 32 positions in fp16 (the default cache).
  EXPECT_GE(r.arena_kv_cache_bytes, 6u * 2 * 32 * 2 * 32 * 2);
  EXPECT_LT(r.arena_kv_cache_bytes, 6u * 2 * 32 * 2 * 32 * 2 + 4096);
  EXPECT_EQ(r.planned_total_bytes, r.process_overhead_bytes + r.weights_bytes + r.arena_bytes);
}

TEST(CApiBudget, TooSmallBudgetStatesTheMinimumAndLargerBudgetsBuyContext) {
  TERN_REQUIRE_BUNDLE(kBundle);
  const std::string path = tern::testing::bundle_path(kBundle);
  tern_model_params mp = tern_model_default_params();
  mp.memory_budget_bytes = 1 << 20;
  tern_model* model = nullptr;
  ASSERT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_BUDGET_TOO_SMALL);
  const std::string msg = message();
  EXPECT_NE(msg.find("at least"), std::string::npos) << msg;

  // The stated minimum loads, with the minimal context; a bigger budget gives more.
  mp.memory_budget_bytes = 0;
  ASSERT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_OK) << message();
  tern_memory_report r;
  ASSERT_EQ(tern_memory_report_get(model, &r), TERN_OK);
  const uint64_t minimum = r.minimum_budget_bytes;
  EXPECT_EQ(r.context_tokens, 512u);  // unlimited: the model's context (tiny-austen: 512)
  tern_model_free(model);
  EXPECT_NE(msg.find(std::to_string(minimum)), std::string::npos) << msg << " vs " << minimum;

  mp.memory_budget_bytes = minimum - 1;
  EXPECT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_BUDGET_TOO_SMALL);
  uint32_t previous = 0;
  for (uint64_t extra : {uint64_t{0}, uint64_t{256} << 10, uint64_t{1} << 20, uint64_t{64} << 20}) {
    mp.memory_budget_bytes = minimum + extra;
    ASSERT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_OK) << message();
    ASSERT_EQ(tern_memory_report_get(model, &r), TERN_OK);
    EXPECT_LE(r.planned_total_bytes, mp.memory_budget_bytes);
    EXPECT_GE(r.context_tokens, previous);
    EXPECT_LE(r.context_tokens, 512u);
    previous = r.context_tokens;
    tern_model_free(model);
  }
  EXPECT_EQ(previous, 512u);  // 64 MiB more is plenty: capped at the model's context
}

int collect(const char* text, size_t size, void* out) {
  static_cast<std::string*>(out)->append(text, size);
  return 0;
}

TEST_F(CApiWithModel, StopStringEndsGenerationWithoutEmittingIt) {
  tern_session_params sp = tern_session_default_params();
  sp.sampler.temperature = 0.0f;
  ASSERT_EQ(tern_session_set_sampler(session_, &sp.sampler), TERN_OK);
  const std::string prompt = "It is a truth universally acknowledged";  // 8 tokens and BOS
  tern_generate_params gp = tern_generate_default_params();
  gp.max_new_tokens = 16;  // within the fixture's 32-token context
  std::string full;
  tern_generate_stats st{};
  ASSERT_EQ(tern_generate(session_, prompt.data(), prompt.size(), &gp, collect, &full, &st), TERN_OK) << message();
  ASSERT_EQ(st.stop_reason, TERN_STOP_MAX_TOKENS);
  // The same greedy request stopped at a word from the middle of that text: everything
  // before the word, and not the word.
  const size_t space = full.find(' ', full.size() / 3);
  ASSERT_NE(space, std::string::npos) << full;
  const size_t word_end = full.find_first_of(" .,", space + 1);
  const std::string stop = full.substr(space + 1, word_end - space - 1);
  ASSERT_FALSE(stop.empty()) << full;
  const char* stops[] = {stop.c_str()};
  gp.stop_strings = stops;
  gp.n_stop_strings = 1;
  ASSERT_EQ(tern_session_reset(session_), TERN_OK);
  std::string text;
  ASSERT_EQ(tern_generate(session_, prompt.data(), prompt.size(), &gp, collect, &text, &st), TERN_OK) << message();
  EXPECT_EQ(st.stop_reason, TERN_STOP_STOP_STRING);
  EXPECT_EQ(text, full.substr(0, full.find(stop))) << "stop string '" << stop << "' in: " << full;
}

}  // namespace

namespace {

TEST_F(CApiWithModel, GenerateLeavesEveryEmittedTokenInTheContext) {
  tern_generate_params gp = tern_generate_default_params();
  gp.max_new_tokens = 5;
  tern_generate_stats st{};
  ASSERT_EQ(tern_generate(session_, "Once upon a time", 16, &gp, nullptr, nullptr, &st), TERN_OK) << message();
  ASSERT_EQ(st.stop_reason, TERN_STOP_MAX_TOKENS);
  uint32_t position = 0;
  ASSERT_EQ(tern_session_position(session_, &position), TERN_OK);
  EXPECT_EQ(position, st.prompt_tokens + 5);
  // A second call continues after them (no second BOS).
  ASSERT_EQ(tern_generate(session_, " and", 4, &gp, nullptr, nullptr, &st), TERN_OK) << message();
  uint32_t after = 0;
  ASSERT_EQ(tern_session_position(session_, &after), TERN_OK);
  EXPECT_EQ(after, position + st.prompt_tokens + 5);
  EXPECT_EQ(st.prompt_tokens, 1u);  // " and" is one piece, no BOS mid-conversation
}

}  // namespace

namespace {

TEST(CApiArena, CallerProvidedArenaIsUsedAndMustBeLargeEnough) {
  TERN_REQUIRE_BUNDLE(kBundle);
  const std::string path = tern::testing::bundle_path(kBundle);
  tern_model_params mp = tern_model_default_params();
  mp.n_ctx = 64;
  tern_model* model = nullptr;
  ASSERT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_OK) << message();
  tern_memory_report r;
  ASSERT_EQ(tern_memory_report_get(model, &r), TERN_OK);
  tern_model_free(model);

  std::vector<uint8_t> storage(r.arena_bytes + 64);
  uint8_t* aligned = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;  // as tern.h asks
  mp.arena_buffer = aligned;
  mp.arena_buffer_bytes = 1024;
  EXPECT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_ARENA_EXHAUSTED);
  EXPECT_NE(message().find(std::to_string(r.arena_bytes)), std::string::npos) << message();
  mp.arena_buffer_bytes = r.arena_bytes;
  ASSERT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_OK) << message();
  tern_session* session = nullptr;
  ASSERT_EQ(tern_session_create(model, nullptr, &session), TERN_OK) << message();
  ASSERT_EQ(tern_decode(session, 1), TERN_OK) << message();
  const float* logits = nullptr;
  ASSERT_EQ(tern_get_logits(session, &logits, nullptr), TERN_OK);
  const auto* at = reinterpret_cast<const uint8_t*>(logits);
  EXPECT_TRUE(at >= aligned && at < aligned + r.arena_bytes);  // scratch lives in the caller's buffer
  tern_session_free(session);
  tern_model_free(model);
}

}  // namespace

namespace {
struct LogCapture {
  std::vector<std::pair<tern_log_level, std::string>> lines;
  static void call(tern_log_level level, const char* message, void* self) {
    static_cast<LogCapture*>(self)->lines.emplace_back(level, message);
  }
};
}  // namespace

// n_threads past the cores would only make workers wait on each other (9999 of them once
// stalled a 2-core machine): the load clamps to the available cores, logs a warning that
// says so, and tern_model_info reports what runs.
TEST(CApiThreads, ThreadCountsAboveTheCoresAreClamped) {
  TERN_REQUIRE_BUNDLE(kBundle);
  LogCapture log;
  tern_set_log_callback(&LogCapture::call, &log);
  tern_model_params mp = tern_model_default_params();
  mp.n_threads = 9999;
  tern_model* model = nullptr;
  const tern_status s = tern_model_load(tern::testing::bundle_path(kBundle).c_str(), &mp, &model);
  tern_set_log_callback(nullptr, nullptr);
  ASSERT_EQ(s, TERN_OK) << message();
  tern_model_info info;
  ASSERT_EQ(tern_model_get_info(model, &info), TERN_OK);
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  EXPECT_GE(info.n_threads, 1u);
  EXPECT_LE(info.n_threads, cores);
  bool warned = false;
  for (const auto& [level, text] : log.lines) {
    warned |= level == TERN_LOG_WARNING && text.find("9999 threads requested") != std::string::npos;
  }
  EXPECT_TRUE(warned) << "no clamp warning logged";
  // The clamped model still generates.
  tern_session* session = nullptr;
  ASSERT_EQ(tern_session_create(model, nullptr, &session), TERN_OK) << message();
  EXPECT_EQ(tern_decode(session, 1), TERN_OK) << message();
  tern_session_free(session);
  tern_model_free(model);
  // Within the cores nothing is said.
  mp.n_threads = 1;
  tern_set_log_callback(&LogCapture::call, &log);
  log.lines.clear();
  ASSERT_EQ(tern_model_load(tern::testing::bundle_path(kBundle).c_str(), &mp, &model), TERN_OK);
  tern_set_log_callback(nullptr, nullptr);
  ASSERT_EQ(tern_model_get_info(model, &info), TERN_OK);
  EXPECT_EQ(info.n_threads, 1u);
  EXPECT_TRUE(log.lines.empty());
  tern_model_free(model);
}
