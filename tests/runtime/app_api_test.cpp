// What an app needs beyond generate: several sessions per model, saving and restoring a
// conversation, rewinding it, biasing logits, penalties, the memory that is really there.
// Each check compares against an independent run (a session never saved, a fresh session
// fed the same tokens, logits penalized by hand), through the public C API.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "platform/memory.h"
#include "include/tern.h"
#include "tests/runtime/bundle_util.h"

namespace {

constexpr const char* kAusten = "tiny-austen-packed.tern";
constexpr const char* kCalibrated = "tiny-austen-calibrated.tern";
// The same model from its bf16 master weights: another bundle of the same shape.
constexpr const char* kOther = "tiny-austen-bf16.tern";
constexpr const char* kLlama = "bitllama2c-3M.tern";
constexpr const char* kLlamaSource = "models/bitllama2c-3M/bit_model.bin";

std::string message() { return tern_last_error_message(); }

struct Loaded {
  tern_model* model = nullptr;
  std::vector<tern_session*> sessions;
  ~Loaded() {
    for (tern_session* s : sessions) tern_session_free(s);
    tern_model_free(model);
  }
};

tern_model_params params_for(const char* mode, uint32_t ctx = 0, uint32_t sessions = 1) {
  tern_model_params p = tern_model_default_params();
  p.kv_mode = mode;
  p.n_ctx = ctx;
  p.n_sessions = sessions;
  return p;
}

tern_status load(Loaded& l, const char* bundle, const tern_model_params& p) {
  return tern_model_load(tern::testing::bundle_path(bundle).c_str(), &p, &l.model);
}

tern_session* open_session(Loaded& l, float temperature, uint64_t seed) {
  tern_session_params sp = tern_session_default_params();
  sp.sampler.temperature = temperature;
  sp.sampler.seed = seed;
  sp.sampler.top_k = 40;
  tern_session* s = nullptr;
  EXPECT_EQ(tern_session_create(l.model, &sp, &s), TERN_OK) << message();
  if (s != nullptr) l.sessions.push_back(s);
  return s;
}

std::vector<int32_t> tokenize(tern_model* m, const char* text) {
  std::vector<int32_t> ids(512);
  size_t n = 0;
  EXPECT_EQ(tern_tokenize(m, text, std::strlen(text), 1, 1, ids.data(), ids.size(), &n), TERN_OK) << message();
  ids.resize(n);
  return ids;
}

// Samples and decodes n tokens; returns them.
std::vector<int32_t> step(tern_session* s, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    int32_t t = -1;
    if (tern_sample(s, &t) != TERN_OK) {
      ADD_FAILURE() << message();
      break;
    }
    out.push_back(t);
    if (tern_decode(s, t) != TERN_OK) {
      ADD_FAILURE() << message();
      break;
    }
  }
  return out;
}

std::vector<float> logits_of(const tern_session* s) {
  const float* l = nullptr;
  size_t n = 0;
  EXPECT_EQ(tern_get_logits(s, &l, &n), TERN_OK) << message();
  return l != nullptr ? std::vector<float>(l, l + n) : std::vector<float>();
}

TEST(AppApi, SeveralSessionsShareOneModelAndEachGetsItsSlot) {
  TERN_REQUIRE_BUNDLE(kAusten);
  const std::string path = tern::testing::bundle_path(kAusten);
  Loaded one, two;
  tern_model_params p = params_for("q4", 200, 1);
  ASSERT_EQ(tern_model_load(path.c_str(), &p, &one.model), TERN_OK) << message();
  p.n_sessions = 3;
  ASSERT_EQ(tern_model_load(path.c_str(), &p, &two.model), TERN_OK) << message();
  tern_memory_report r1, r3;
  ASSERT_EQ(tern_memory_report_get(one.model, &r1), TERN_OK);
  ASSERT_EQ(tern_memory_report_get(two.model, &r3), TERN_OK);
  EXPECT_EQ(r3.sessions, 3u);
  EXPECT_EQ(r3.session_bytes, r1.session_bytes);  // same context, same slot
  EXPECT_GE(r3.arena_bytes, r1.arena_bytes + 2 * r1.session_bytes);
  tern_model_info info;
  ASSERT_EQ(tern_model_get_info(two.model, &info), TERN_OK);
  EXPECT_EQ(info.n_sessions, 3u);

  const std::vector<int32_t> prompt = tokenize(one.model, "It was a bright cold day");
  tern_session* ref = open_session(one, 0.0f, 1);
  ASSERT_EQ(tern_prefill(ref, prompt.data(), prompt.size()), TERN_OK);
  const std::vector<int32_t> want = step(ref, 24);

  std::vector<tern_session*> s;
  for (int i = 0; i < 3; ++i) s.push_back(open_session(two, 0.0f, 1));
  tern_session* fourth = nullptr;
  EXPECT_EQ(tern_session_create(two.model, nullptr, &fourth), TERN_INVALID_STATE);
  EXPECT_NE(message().find("3 session slots"), std::string::npos) << message();
  ASSERT_EQ(tern_memory_report_get(two.model, &r3), TERN_OK);
  EXPECT_EQ(r3.sessions_in_use, 3u);
  // Interleaved, each session's text is its own: the same as the one-session model's.
  for (tern_session* x : s) ASSERT_EQ(tern_prefill(x, prompt.data(), prompt.size()), TERN_OK);
  std::vector<std::vector<int32_t>> got(3);
  for (int i = 0; i < 24; ++i)
    for (int k = 0; k < 3; ++k) got[k].push_back(step(s[k], 1)[0]);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(got[k], want) << "session " << k;
  // A freed slot is reused.
  tern_session_free(s[1]);
  two.sessions.erase(std::find(two.sessions.begin(), two.sessions.end(), s[1]));
  EXPECT_NE(open_session(two, 0.0f, 1), nullptr);
}

// Planning "how many sessions of N tokens fit": loading that many at the plan's total works,
// one more does not.
TEST(AppApi, PlanSaysHowManySessionsFit) {
  TERN_REQUIRE_BUNDLE(kAusten);
  const std::string path = tern::testing::bundle_path(kAusten);
  tern_model_params p = params_for(nullptr, 256);
  p.memory_budget_bytes = uint64_t{24} << 20;
  const char* modes[] = {"q4"};
  tern_plan_row row{};
  size_t count = 0;
  ASSERT_EQ(tern_plan(path.c_str(), &p, modes, 1, &row, 1, &count), TERN_OK) << message();
  ASSERT_EQ(row.status, TERN_OK) << message();
  ASSERT_GE(row.sessions_that_fit, 2u);
  p.kv_mode = "q4";
  p.n_sessions = row.sessions_that_fit;
  Loaded fits;
  ASSERT_EQ(tern_model_load(path.c_str(), &p, &fits.model), TERN_OK) << message();
  tern_memory_report r;
  ASSERT_EQ(tern_memory_report_get(fits.model, &r), TERN_OK);
  EXPECT_LE(r.planned_total_bytes, p.memory_budget_bytes);
  EXPECT_GE(r.context_tokens, 256u);
  p.n_sessions = row.sessions_that_fit + 1;
  Loaded too_many;
  // One more session: the budget either refuses or shrinks each session's context.
  const tern_status s = tern_model_load(path.c_str(), &p, &too_many.model);
  if (s == TERN_OK) {
    ASSERT_EQ(tern_memory_report_get(too_many.model, &r), TERN_OK);
    EXPECT_LT(r.context_tokens, 256u);
  } else {
    EXPECT_EQ(s, TERN_BUDGET_TOO_SMALL);
  }
}

// Saving mid-conversation and restoring into a fresh session continues with exactly the
// tokens the session would have produced had it never been saved: greedy and sampled, every
// KV mode, and past the capacity for an evicting one.
void save_restore_continues_exactly(const char* bundle, const char* mode, uint32_t ctx, int before, int after,
                                    float temperature) {
  SCOPED_TRACE(std::string(bundle) + " " + mode + " temp " + std::to_string(temperature));
  Loaded l;
  ASSERT_EQ(load(l, bundle, params_for(mode, ctx, 2)), TERN_OK) << message();
  tern_session* a = open_session(l, temperature, 99);
  const std::vector<int32_t> prompt = tokenize(l.model, "Once upon a time there was");
  ASSERT_EQ(tern_prefill(a, prompt.data(), prompt.size()), TERN_OK);
  step(a, before);
  size_t size = 0;
  ASSERT_EQ(tern_session_state_size(a, &size), TERN_OK);
  std::vector<uint8_t> state(size);
  size_t written = 0;
  EXPECT_EQ(tern_session_state_save(a, state.data(), size - 1, &written), TERN_OUT_OF_RANGE);
  EXPECT_EQ(written, size);
  ASSERT_EQ(tern_session_state_save(a, state.data(), state.size(), &written), TERN_OK) << message();
  ASSERT_EQ(written, size);
  const std::vector<int32_t> want = step(a, after);

  tern_session* b = open_session(l, 0.7f, 12345);  // other sampler settings: the state brings its own
  ASSERT_EQ(tern_decode(b, prompt[0]), TERN_OK);    // and a conversation to replace
  ASSERT_EQ(tern_session_state_load(b, state.data(), state.size()), TERN_OK) << message();
  EXPECT_EQ(step(b, after), want);

  // Through a file, into the first session after it moved on.
  tern::testing::TempFile file(".state");
  ASSERT_EQ(tern_session_state_save_file(b, file.path().c_str()), TERN_OK) << message();
  const std::vector<int32_t> more = step(b, 8);
  ASSERT_EQ(tern_session_state_load_file(a, file.path().c_str()), TERN_OK) << message();
  EXPECT_EQ(step(a, 8), more);
}

TEST(AppApi, SavedSessionContinuesExactlyInEveryKvMode) {
  TERN_REQUIRE_BUNDLE(kAusten);
  for (const char* mode : {"f32", "fp16", "q8", "q4", "q2", "k4v2"}) {
    for (float temperature : {0.0f, 0.8f}) save_restore_continues_exactly(kAusten, mode, 200, 20, 24, temperature);
  }
  // An evicting cache saved past its capacity (132 positions: 4 sinks, 2 blocks, window 64).
  save_restore_continues_exactly(kAusten, "q4", 132, 150, 40, 0.8f);
  TERN_REQUIRE_BUNDLE(kCalibrated);
  save_restore_continues_exactly(kCalibrated, "adaptive:3", 200, 20, 20, 0.8f);
}

// The other family (bitllama2.c: SiLU-gated FFN, no sub-norms).
TEST(AppApi, SavedBitllama2cSessionContinuesExactly) {
  TERN_REQUIRE_SHARED_BUNDLE(kLlama, kLlamaSource);
  save_restore_continues_exactly(kLlama, "f32", 0, 30, 30, 0.0f);
}

TEST(AppApi, StateFromAnotherModeOrBundleOrDamagedIsRefused) {
  TERN_REQUIRE_BUNDLE(kAusten);
  TERN_REQUIRE_BUNDLE(kOther);
  Loaded q4, q2, other;
  tern_model_params p = params_for("q4", 200, 2);
  ASSERT_EQ(tern_model_load(tern::testing::bundle_path(kAusten).c_str(), &p, &q4.model), TERN_OK);
  p.kv_mode = "q2";
  ASSERT_EQ(tern_model_load(tern::testing::bundle_path(kAusten).c_str(), &p, &q2.model), TERN_OK);
  p.kv_mode = "q4";
  ASSERT_EQ(tern_model_load(tern::testing::bundle_path(kOther).c_str(), &p, &other.model), TERN_OK);
  tern_session* a = open_session(q4, 0.0f, 1);
  const std::vector<int32_t> prompt = tokenize(q4.model, "It is a truth");
  ASSERT_EQ(tern_prefill(a, prompt.data(), prompt.size()), TERN_OK);
  size_t size = 0, written = 0;
  ASSERT_EQ(tern_session_state_size(a, &size), TERN_OK);
  std::vector<uint8_t> state(size);
  ASSERT_EQ(tern_session_state_save(a, state.data(), size, &written), TERN_OK);

  tern_session* b = open_session(q2, 0.0f, 1);
  ASSERT_EQ(tern_prefill(b, prompt.data(), 3), TERN_OK);
  const std::vector<float> before = logits_of(b);
  EXPECT_EQ(tern_session_state_load(b, state.data(), state.size()), TERN_INVALID_ARGUMENT);
  EXPECT_NE(message().find("KV mode q4"), std::string::npos) << message();
  // Nothing was lost: the session goes on where it was.
  uint32_t pos = 0;
  ASSERT_EQ(tern_session_position(b, &pos), TERN_OK);
  EXPECT_EQ(pos, 3u);
  EXPECT_EQ(logits_of(b), before);

  tern_session* c = open_session(other, 0.0f, 1);
  EXPECT_EQ(tern_session_state_load(c, state.data(), state.size()), TERN_INVALID_ARGUMENT);
  EXPECT_NE(message().find("another bundle"), std::string::npos) << message();

  tern_session* d = open_session(q4, 0.0f, 1);
  std::vector<uint8_t> bad = state;
  bad[bad.size() / 2] ^= 0x40;
  EXPECT_EQ(tern_session_state_load(d, bad.data(), bad.size()), TERN_CORRUPT_FILE) << message();
  EXPECT_EQ(tern_session_state_load(d, state.data(), state.size() - 9), TERN_TRUNCATED) << message();
  EXPECT_EQ(tern_session_state_load(d, state.data(), 10), TERN_TRUNCATED) << message();
  bad = state;
  bad[0] = 'X';
  EXPECT_EQ(tern_session_state_load(d, bad.data(), bad.size()), TERN_BAD_MAGIC) << message();
  EXPECT_EQ(tern_session_state_load_file(d, "/nonexistent/state"), TERN_FILE_NOT_FOUND) << message();
  EXPECT_EQ(tern_session_state_load(nullptr, state.data(), state.size()), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(tern_session_state_save(a, nullptr, 5, &written), TERN_INVALID_ARGUMENT);
}

// Truncating to k tokens leaves logits equal to a fresh session that ran just those k tokens
// (one at a time, as the truncated session did), whether the cache rolls back in place or
// runs them again.
void truncate_matches_fresh(const char* mode, uint32_t ctx, int generated, uint32_t keep_from_end) {
  SCOPED_TRACE(std::string(mode) + " keep all but " + std::to_string(keep_from_end));
  Loaded l;
  ASSERT_EQ(load(l, kAusten, params_for(mode, ctx, 2)), TERN_OK) << message();
  tern_session* s = open_session(l, 0.0f, 1);
  const std::vector<int32_t> prompt = tokenize(l.model, "It is a truth universally");
  std::vector<int32_t> all = prompt;
  for (int32_t t : prompt) ASSERT_EQ(tern_decode(s, t), TERN_OK);
  for (int32_t t : step(s, generated)) all.push_back(t);
  const uint32_t keep = static_cast<uint32_t>(all.size()) - keep_from_end;
  ASSERT_EQ(tern_session_truncate(s, keep), TERN_OK) << message();
  uint32_t pos = 0;
  ASSERT_EQ(tern_session_position(s, &pos), TERN_OK);
  EXPECT_EQ(pos, keep);
  tern_session* fresh = open_session(l, 0.0f, 1);
  for (uint32_t i = 0; i < keep; ++i) ASSERT_EQ(tern_decode(fresh, all[i]), TERN_OK);
  const std::vector<float> a = logits_of(s), b = logits_of(fresh);
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  EXPECT_EQ(worst, 0.0f);
  // And it generates on from there like the fresh one.
  EXPECT_EQ(step(s, 10), step(fresh, 10));
}

TEST(AppApi, TruncateRewindsExactly) {
  TERN_REQUIRE_BUNDLE(kAusten);
  truncate_matches_fresh("f32", 0, 30, 12);
  truncate_matches_fresh("fp16", 0, 30, 1);
  truncate_matches_fresh("q4", 300, 20, 5);    // inside the exact window: rolled back in place
  truncate_matches_fresh("q4", 300, 120, 70);  // blocks were flushed since: the kept tokens run again
  Loaded l;
  ASSERT_EQ(load(l, kAusten, params_for("q4", 132)), TERN_OK) << message();
  tern_session* s = open_session(l, 0.0f, 1);
  const std::vector<int32_t> prompt = tokenize(l.model, "It is");
  ASSERT_EQ(tern_prefill(s, prompt.data(), prompt.size()), TERN_OK);
  EXPECT_EQ(tern_session_truncate(s, 99), TERN_INVALID_ARGUMENT);
  step(s, 300);  // past the capacity: early positions are evicted
  EXPECT_EQ(tern_session_truncate(s, 20), TERN_INVALID_STATE);
  EXPECT_NE(message().find("evicted"), std::string::npos) << message();
  EXPECT_EQ(tern_session_truncate(s, 0), TERN_OK);
}

// The history is what was fed and sampled, in order (what a server compares a new prompt
// with); too small a buffer gets the newest tokens and OUT_OF_RANGE.
TEST(AppApi, HistoryHoldsThePromptAndTheSampledTokens) {
  TERN_REQUIRE_BUNDLE(kAusten);
  Loaded l;
  ASSERT_EQ(load(l, kAusten, params_for("f32", 128)), TERN_OK) << message();
  tern_session* s = open_session(l, 0.9f, 3);
  size_t n = 99;
  ASSERT_EQ(tern_session_history(s, nullptr, 0, &n), TERN_OK) << message();
  EXPECT_EQ(n, 0u);
  std::vector<int32_t> all = tokenize(l.model, "It is a truth universally");
  ASSERT_EQ(tern_prefill(s, all.data(), all.size()), TERN_OK) << message();
  for (int32_t t : step(s, 17)) all.push_back(t);
  std::vector<int32_t> got(all.size() + 5, -7);
  ASSERT_EQ(tern_session_history(s, got.data(), got.size(), &n), TERN_OK) << message();
  ASSERT_EQ(n, all.size());
  got.resize(n);
  EXPECT_EQ(got, all);
  std::vector<int32_t> last(4);
  EXPECT_EQ(tern_session_history(s, last.data(), last.size(), &n), TERN_OUT_OF_RANGE);
  EXPECT_EQ(n, all.size());
  EXPECT_EQ(last, std::vector<int32_t>(all.end() - 4, all.end()));
  // After a rewind it is the kept prefix.
  ASSERT_EQ(tern_session_truncate(s, 9), TERN_OK) << message();
  got.assign(32, 0);
  ASSERT_EQ(tern_session_history(s, got.data(), got.size(), &n), TERN_OK);
  got.resize(n);
  EXPECT_EQ(got, std::vector<int32_t>(all.begin(), all.begin() + 9));
  EXPECT_EQ(tern_session_history(nullptr, got.data(), got.size(), &n), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(tern_session_history(s, nullptr, 4, &n), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(tern_session_history(s, got.data(), got.size(), nullptr), TERN_INVALID_ARGUMENT);
}

// With the bias or hook in place, sampling picks what the biased logits say: checked against
// the raw logits, biased by hand.
TEST(AppApi, LogitBiasAndHookSteerSampling) {
  TERN_REQUIRE_BUNDLE(kAusten);
  Loaded l;
  ASSERT_EQ(load(l, kAusten, params_for("f32", 128)), TERN_OK) << message();
  tern_session* s = open_session(l, 0.0f, 1);
  const std::vector<int32_t> prompt = tokenize(l.model, "It is a truth universally");
  ASSERT_EQ(tern_prefill(s, prompt.data(), prompt.size()), TERN_OK);
  std::vector<float> raw = logits_of(s);
  const int32_t best = static_cast<int32_t>(std::max_element(raw.begin(), raw.end()) - raw.begin());
  raw[best] = -INFINITY;
  const int32_t second = static_cast<int32_t>(std::max_element(raw.begin(), raw.end()) - raw.begin());
  const tern_logit_bias ban[] = {{best, -INFINITY}};
  ASSERT_EQ(tern_session_set_logit_bias(s, ban, 1), TERN_OK);
  int32_t t = -1;
  ASSERT_EQ(tern_sample(s, &t), TERN_OK);
  EXPECT_EQ(t, second);
  const tern_logit_bias favour[] = {{7, 1000.0f}};
  ASSERT_EQ(tern_session_set_logit_bias(s, favour, 1), TERN_OK);
  ASSERT_EQ(tern_sample(s, &t), TERN_OK);
  EXPECT_EQ(t, 7);
  ASSERT_EQ(tern_session_set_logit_bias(s, nullptr, 0), TERN_OK);
  ASSERT_EQ(tern_sample(s, &t), TERN_OK);
  EXPECT_EQ(t, best);
  // The raw logits are untouched by either.
  const std::vector<float> after = logits_of(s);
  EXPECT_EQ(after[best], *std::max_element(after.begin(), after.end()));

  struct Hook {
    static void only_odd(float* logits, size_t n, const int32_t*, size_t n_history, void* user) {
      *static_cast<size_t*>(user) = n_history;
      for (size_t i = 0; i < n; i += 2) logits[i] = -INFINITY;
    }
  };
  size_t seen_history = 0;
  ASSERT_EQ(tern_session_set_logit_hook(s, &Hook::only_odd, &seen_history), TERN_OK);
  for (int32_t u : step(s, 12)) EXPECT_EQ(u % 2, 1);
  EXPECT_GE(seen_history, prompt.size());
  ASSERT_EQ(tern_session_set_logit_hook(s, nullptr, nullptr), TERN_OK);

  const tern_logit_bias out_of_range[] = {{1 << 30, 1.0f}};
  EXPECT_EQ(tern_session_set_logit_bias(s, out_of_range, 1), TERN_INVALID_TOKEN);
  const tern_logit_bias nan_bias[] = {{3, NAN}};
  EXPECT_EQ(tern_session_set_logit_bias(s, nan_bias, 1), TERN_INVALID_ARGUMENT);
  std::vector<tern_logit_bias> too_many(1025, tern_logit_bias{1, 1.0f});
  EXPECT_EQ(tern_session_set_logit_bias(s, too_many.data(), too_many.size()), TERN_INVALID_ARGUMENT);
}

// Presence and frequency penalties: the greedy pick equals the argmax of the logits with
// c * frequency + presence subtracted for every token seen c times in the window.
TEST(AppApi, PresenceAndFrequencyPenaltiesFollowTheFormula) {
  TERN_REQUIRE_BUNDLE(kAusten);
  Loaded l;
  ASSERT_EQ(load(l, kAusten, params_for("f32", 256)), TERN_OK) << message();
  tern_session_params sp = tern_session_default_params();
  sp.sampler.temperature = 0.0f;
  sp.sampler.presence_penalty = 0.7f;
  sp.sampler.frequency_penalty = 0.9f;
  sp.sampler.repeat_last_n = 16;
  tern_session* s = nullptr;
  ASSERT_EQ(tern_session_create(l.model, &sp, &s), TERN_OK);
  l.sessions.push_back(s);
  const std::vector<int32_t> prompt = tokenize(l.model, "the the the of the of a");
  std::vector<int32_t> history = prompt;
  ASSERT_EQ(tern_prefill(s, prompt.data(), prompt.size()), TERN_OK);
  int differs = 0;
  for (int i = 0; i < 30; ++i) {
    std::vector<float> raw = logits_of(s);
    const int32_t plain = static_cast<int32_t>(std::max_element(raw.begin(), raw.end()) - raw.begin());
    const size_t n = std::min<size_t>(history.size(), 16);
    std::vector<int> count(raw.size(), 0);
    for (size_t k = history.size() - n; k < history.size(); ++k) ++count[history[k]];
    for (size_t v = 0; v < raw.size(); ++v) {
      if (count[v] > 0) raw[v] -= static_cast<float>(count[v]) * 0.9f + 0.7f;
    }
    const int32_t want = static_cast<int32_t>(std::max_element(raw.begin(), raw.end()) - raw.begin());
    int32_t got = -1;
    ASSERT_EQ(tern_sample(s, &got), TERN_OK);
    ASSERT_EQ(got, want) << "step " << i;
    differs += got != plain;
    history.push_back(got);
    ASSERT_EQ(tern_decode(s, got), TERN_OK);
  }
  EXPECT_GT(differs, 0) << "the penalties never changed a pick: the test checks nothing";
  sp.sampler.presence_penalty = NAN;
  EXPECT_EQ(tern_session_set_sampler(s, &sp.sampler), TERN_INVALID_ARGUMENT);
}

// Available memory from fixture files (MemAvailable, then a cgroup limit below it), and on
// this machine against /proc/meminfo read independently.
TEST(AppApi, AvailableMemoryIsMemAvailableCappedByTheCgroup) {
  tern::testing::TempDir dir;
  const std::string meminfo = dir.path() + "/meminfo";
  std::ofstream(meminfo) << "MemTotal:       16000000 kB\nMemFree:         100000 kB\nMemAvailable:    2000000 kB\n";
  auto plain = tern::available_memory_from(meminfo.c_str(), nullptr);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain, uint64_t{2000000} * 1024);
  std::ofstream(dir.path() + "/memory.max") << "1073741824\n";
  std::ofstream(dir.path() + "/memory.current") << "268435456\n";
  auto capped = tern::available_memory_from(meminfo.c_str(), dir.path().c_str());
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(*capped, uint64_t{768} << 20);
  std::ofstream(dir.path() + "/memory.max") << "max\n";
  EXPECT_EQ(*tern::available_memory_from(meminfo.c_str(), dir.path().c_str()), uint64_t{2000000} * 1024);
  std::ofstream(meminfo) << "MemTotal: 1 kB\n";
  EXPECT_EQ(tern::available_memory_from(meminfo.c_str(), nullptr).error(), tern::Error::NotSupported);

  uint64_t real = 0;
  ASSERT_EQ(tern_available_memory(&real), TERN_OK) << message();
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0, total = 0;
  while (in >> key >> kib) {
    if (key == "MemTotal:") total = kib * 1024;
    in.ignore(64, '\n');
  }
  EXPECT_GT(real, 0u);
  EXPECT_LE(real, total);
  uint64_t budget = 0;
  ASSERT_EQ(tern_parse_memory_budget("available-25%", &budget), TERN_OK);
  EXPECT_NEAR(static_cast<double>(budget), 0.75 * static_cast<double>(real), 0.05 * static_cast<double>(real));
  ASSERT_EQ(tern_parse_memory_budget("512M", &budget), TERN_OK);
  EXPECT_EQ(budget, uint64_t{512} << 20);
  for (const char* bad : {"available-", "available-100%", "available-5", "availablex", "lots"}) {
    EXPECT_EQ(tern_parse_memory_budget(bad, &budget), TERN_INVALID_ARGUMENT) << bad;
  }
}

// The plain fallback (tiny-austen's checkpoint has no chat template), checked against the
// format's definition, and the errors an app can make.
TEST(AppApi, ChatApplyRendersAndRejectsBadInput) {
  TERN_REQUIRE_BUNDLE(kAusten);
  Loaded l;
  ASSERT_EQ(tern_model_load(tern::testing::bundle_path(kAusten).c_str(), nullptr, &l.model), TERN_OK);
  tern_model_info info;
  ASSERT_EQ(tern_model_get_info(l.model, &info), TERN_OK);
  EXPECT_STREQ(info.chat_format, "plain");
  EXPECT_STREQ(info.chat_stop, "\nUser:");
  const tern_chat_message chat[] = {{"system", "Be brief."}, {"user", "Who is Emma?"}, {"assistant", " A heroine. "}};
  char buf[256];
  size_t size = 0;
  ASSERT_EQ(tern_chat_apply(l.model, chat, 3, 1, buf, sizeof buf, &size), TERN_OK) << message();
  EXPECT_STREQ(buf, "<|begin_of_text|>System: Be brief.\nUser: Who is Emma?\nAssistant: A heroine.\nAssistant:");
  EXPECT_EQ(size, std::strlen(buf));
  ASSERT_EQ(tern_chat_apply(l.model, chat, 2, 0, buf, sizeof buf, &size), TERN_OK);
  EXPECT_STREQ(buf, "<|begin_of_text|>System: Be brief.\nUser: Who is Emma?\n");
  char small[8];
  EXPECT_EQ(tern_chat_apply(l.model, chat, 2, 0, small, sizeof small, &size), TERN_OUT_OF_RANGE);
  EXPECT_EQ(size, std::strlen(buf));  // says how large the buffer must be
  EXPECT_EQ(tern_chat_apply(l.model, chat, 2, 0, nullptr, 0, &size), TERN_OUT_OF_RANGE);
  EXPECT_EQ(size, std::strlen(buf));
  const tern_chat_message unknown[] = {{"robot", "hi"}};
  EXPECT_EQ(tern_chat_apply(l.model, unknown, 1, 1, buf, sizeof buf, &size), TERN_INVALID_ARGUMENT);
  EXPECT_NE(message().find("robot"), std::string::npos) << message();
  const tern_chat_message invalid[] = {{"user", "caf\xC3"}};
  EXPECT_EQ(tern_chat_apply(l.model, invalid, 1, 1, buf, sizeof buf, &size), TERN_INVALID_UTF8);
  const tern_chat_message null_content[] = {{"user", nullptr}};
  EXPECT_EQ(tern_chat_apply(l.model, null_content, 1, 1, buf, sizeof buf, &size), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(tern_chat_apply(nullptr, chat, 1, 1, buf, sizeof buf, &size), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(tern_chat_apply(l.model, nullptr, 1, 1, buf, sizeof buf, &size), TERN_INVALID_ARGUMENT);
}

}  // namespace
