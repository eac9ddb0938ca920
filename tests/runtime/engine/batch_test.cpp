// Sessions decoded together (tern_decode_batch, and sessions on several threads merged by the
// model's forward queue) against each session run alone: the same greedy tokens and the same
// logits, bit for bit, for every KV mode, lm_head type and mix of prompts and decode steps.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "include/tern.h"
#include "runtime/engine/model.h"
#include "tests/support/bundle_util.h"

namespace {

constexpr int kSteps = 20;
const char* const kPrompts[] = {
    "It is a truth universally acknowledged, that a single man in possession of a good fortune",
    "Mr. Darcy",
    "She was",
    "The day passed much as the day before had done. Mrs. Hurst and Miss Bingley had spent some hours of the "
    "morning with the invalid, who continued, though slowly, to mend",
};
constexpr size_t kStreams = sizeof kPrompts / sizeof kPrompts[0];

struct Case {
  const char* bundle;
  const char* kv_mode;
  bool evict;
  uint32_t batch_tokens = 0;  // 0: the default; small ones split prompts and steps into pieces
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.bundle << " " << c.kv_mode << (c.evict ? " evict" : "") << " batch " << c.batch_tokens;
}

std::string name_of(const ::testing::TestParamInfo<Case>& info) {
  std::string n = std::string(info.param.bundle) + "_" + info.param.kv_mode + (info.param.evict ? "_evict" : "") +
                  (info.param.batch_tokens != 0 ? "_batch" + std::to_string(info.param.batch_tokens) : "");
  for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return n;
}

// What one stream produced: its greedy tokens and the logits after every step.
struct Trace {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};

class Batch : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    TERN_REQUIRE_BUNDLE(GetParam().bundle);
    tern_model_params mp = tern_model_default_params();
    mp.n_ctx = GetParam().evict ? 64 : 256;  // with eviction, the long prompts wrap
    mp.n_sessions = kStreams;
    mp.kv_mode = GetParam().kv_mode;
    mp.kv_eviction = GetParam().evict ? 1 : 0;
    if (GetParam().batch_tokens != 0) mp.n_batch = GetParam().batch_tokens;
    ASSERT_EQ(tern_model_load(tern::testing::bundle_path(GetParam().bundle).c_str(), &mp, &model_), TERN_OK)
        << tern_last_error_message();
    tern_model_info info;
    ASSERT_EQ(tern_model_get_info(model_, &info), TERN_OK);
    vocab_ = info.vocab_size;
    for (size_t i = 0; i < kStreams; ++i) {
      tern_session_params sp = tern_session_default_params();
      sp.sampler.temperature = 0.0f;
      ASSERT_EQ(tern_session_create(model_, &sp, &sessions_[i]), TERN_OK) << tern_last_error_message();
      prompts_[i] = tokenize(kPrompts[i]);
    }
  }
  void TearDown() override {
    for (tern_session* s : sessions_) tern_session_free(s);
    tern_model_free(model_);
  }

  std::vector<int32_t> tokenize(const char* text) {
    std::vector<int32_t> ids(512);
    size_t n = 0;
    EXPECT_EQ(tern_tokenize(model_, text, std::strlen(text), true, false, ids.data(), ids.size(), &n), TERN_OK);
    ids.resize(n);
    return ids;
  }

  std::vector<float> logits(tern_session* s) {
    const float* p = nullptr;
    size_t n = 0;
    EXPECT_EQ(tern_get_logits(s, &p, &n), TERN_OK);
    return std::vector<float>(p, p + n);
  }

  // Stream i alone: its prompt, then kSteps greedy tokens.
  Trace alone(size_t i) {
    tern_session* s = sessions_[i];
    EXPECT_EQ(tern_session_reset(s), TERN_OK);
    Trace t;
    EXPECT_EQ(tern_prefill(s, prompts_[i].data(), prompts_[i].size()), TERN_OK) << tern_last_error_message();
    t.logits.push_back(logits(s));
    for (int step = 0; step < kSteps; ++step) {
      int32_t token = -1;
      EXPECT_EQ(tern_sample(s, &token), TERN_OK);
      t.tokens.push_back(token);
      EXPECT_EQ(tern_decode(s, token), TERN_OK) << tern_last_error_message();
      t.logits.push_back(logits(s));
    }
    return t;
  }

  static void expect_same(const Trace& got, const Trace& want, size_t stream) {
    ASSERT_EQ(got.tokens, want.tokens) << "stream " << stream;
    ASSERT_EQ(got.logits.size(), want.logits.size());
    for (size_t k = 0; k < want.logits.size(); ++k) {
      ASSERT_EQ(0, std::memcmp(got.logits[k].data(), want.logits[k].data(), want.logits[k].size() * sizeof(float)))
          << "stream " << stream << ", logits after step " << k;
    }
  }

  tern_model* model_ = nullptr;
  tern_session* sessions_[kStreams] = {};
  std::vector<int32_t> prompts_[kStreams];
  size_t vocab_ = 0;
};

// tern_decode_batch from one thread: stream i joins at step 3 * i (its whole prompt in one
// entry, beside the others' decode steps), so prompts and decode steps share passes.
TEST_P(Batch, SteppedTogetherEqualsAlone) {
  Trace want[kStreams];
  for (size_t i = 0; i < kStreams; ++i) want[i] = alone(i);
  for (tern_session* s : sessions_) ASSERT_EQ(tern_session_reset(s), TERN_OK);
  Trace got[kStreams];
  int32_t next[kStreams] = {};
  auto done = [&](size_t i) { return got[i].tokens.size() == static_cast<size_t>(kSteps); };
  for (int step = 0; !done(kStreams - 1); ++step) {
    tern_batch_entry entries[kStreams];
    size_t index[kStreams];
    size_t n = 0;
    for (size_t i = 0; i < kStreams; ++i) {
      if (step < static_cast<int>(3 * i) || done(i)) continue;
      const bool joining = got[i].logits.empty();
      entries[n] = {sessions_[i], joining ? prompts_[i].data() : &next[i], joining ? prompts_[i].size() : 1,
                    TERN_INTERNAL};
      index[n++] = i;
    }
    ASSERT_EQ(tern_decode_batch(entries, n), TERN_OK) << tern_last_error_message();
    for (size_t k = 0; k < n; ++k) {
      const size_t i = index[k];
      ASSERT_EQ(entries[k].status, TERN_OK);
      if (!got[i].logits.empty()) got[i].tokens.push_back(next[i]);
      got[i].logits.push_back(logits(sessions_[i]));
      if (!done(i)) {
        ASSERT_EQ(tern_sample(sessions_[i], &next[i]), TERN_OK);
      }
    }
  }
  for (size_t i = 0; i < kStreams; ++i) expect_same(got[i], want[i], i);
}

// Four threads generating at once: the model's queue merges their passes, and each stream's
// text is what it generates alone.
TEST_P(Batch, ThreadsMergedEqualAlone) {
  Trace want[kStreams];
  for (size_t i = 0; i < kStreams; ++i) want[i] = alone(i);
  const tern::Model& model = *reinterpret_cast<const tern::Model*>(model_);
  const uint64_t passes0 = model.forward_queue().passes(), rows0 = model.forward_queue().rows();
  Trace got[kStreams];
  std::vector<std::thread> threads;
  for (size_t i = 0; i < kStreams; ++i) threads.emplace_back([&, i] { got[i] = alone(i); });
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < kStreams; ++i) expect_same(got[i], want[i], i);
  // Merging happened: fewer passes than sessions' steps (each stream's kSteps + 1 forward
  // calls would be passes of their own if nothing merged).
  const uint64_t passes = model.forward_queue().passes() - passes0;
  const uint64_t rows = model.forward_queue().rows() - rows0;
  EXPECT_GT(rows, passes) << "no pass held more than one session's rows";
}

INSTANTIATE_TEST_SUITE_P(Modes, Batch,
                         ::testing::Values(Case{"tiny-austen-packed.tern", "f32", false},
                                           Case{"tiny-austen-2b4t-chat.tern", "fp16", false},
                                           Case{"tiny-austen-calibrated.tern", "adaptive:3", false},
                                           Case{"tiny-austen-packed.tern", "q4", true},
                                           Case{"tiny-austen-packed.tern", "fp16", false, 3}),
                         name_of);

// Bad arguments: nothing runs, each session keeps its state; a bad entry fails alone.
TEST(BatchErrors, RefusedOrFailAlone) {
  TERN_REQUIRE_BUNDLE("tiny-austen-packed.tern");
  tern_model_params mp = tern_model_default_params();
  mp.n_ctx = 64;
  mp.n_sessions = 2;
  tern_model *a = nullptr, *b = nullptr;
  const std::string path = tern::testing::bundle_path("tiny-austen-packed.tern");
  ASSERT_EQ(tern_model_load(path.c_str(), &mp, &a), TERN_OK) << tern_last_error_message();
  ASSERT_EQ(tern_model_load(path.c_str(), &mp, &b), TERN_OK) << tern_last_error_message();
  tern_session_params sp = tern_session_default_params();
  tern_session *s1 = nullptr, *s2 = nullptr, *other = nullptr;
  ASSERT_EQ(tern_session_create(a, &sp, &s1), TERN_OK);
  ASSERT_EQ(tern_session_create(a, &sp, &s2), TERN_OK);
  ASSERT_EQ(tern_session_create(b, &sp, &other), TERN_OK);
  const int32_t ok[] = {1, 2, 3};
  const int32_t bad[] = {1, 1 << 30};
  uint32_t pos = 0;

  tern_batch_entry twice[] = {{s1, ok, 3, TERN_OK}, {s1, ok, 3, TERN_OK}};
  EXPECT_EQ(tern_decode_batch(twice, 2), TERN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tern_last_error_message()).find("listed twice"), std::string::npos);
  tern_batch_entry mixed[] = {{s1, ok, 3, TERN_OK}, {other, ok, 3, TERN_OK}};
  EXPECT_EQ(tern_decode_batch(mixed, 2), TERN_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tern_last_error_message()).find("another model"), std::string::npos);
  tern_batch_entry null_session[] = {{nullptr, ok, 3, TERN_OK}};
  EXPECT_EQ(tern_decode_batch(null_session, 1), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(tern_decode_batch(nullptr, 1), TERN_INVALID_ARGUMENT);
  ASSERT_EQ(tern_session_position(s1, &pos), TERN_OK);
  EXPECT_EQ(pos, 0u) << "a refused batch ran";

  // One bad token: that entry fails, the other runs.
  tern_batch_entry one_bad[] = {{s1, ok, 3, TERN_OK}, {s2, bad, 2, TERN_OK}};
  EXPECT_EQ(tern_decode_batch(one_bad, 2), TERN_INVALID_TOKEN);
  EXPECT_EQ(one_bad[0].status, TERN_OK);
  EXPECT_EQ(one_bad[1].status, TERN_INVALID_TOKEN);
  ASSERT_EQ(tern_session_position(s1, &pos), TERN_OK);
  EXPECT_EQ(pos, 3u);
  ASSERT_EQ(tern_session_position(s2, &pos), TERN_OK);
  EXPECT_EQ(pos, 0u);
  // Past the context: that entry fails with the room left named, the other runs.
  std::vector<int32_t> many(70, 5);
  tern_batch_entry too_long[] = {{s1, ok, 1, TERN_OK}, {s2, many.data(), many.size(), TERN_OK}};
  EXPECT_EQ(tern_decode_batch(too_long, 2), TERN_PROMPT_TOO_LONG);
  EXPECT_EQ(too_long[0].status, TERN_OK);
  EXPECT_EQ(too_long[1].status, TERN_PROMPT_TOO_LONG);
  EXPECT_EQ(tern_decode_batch(too_long, 0), TERN_OK);

  tern_session_free(s1);
  tern_session_free(s2);
  tern_session_free(other);
  tern_model_free(a);
  tern_model_free(b);
}

}  // namespace
