// Two sessions of one model generating at the same time from two threads: each produces
// exactly the text it produces alone, also when one copies the grammar the other compiled
// while the other generates under it; and an abort from a third thread stops only its
// target. Run under ThreadSanitizer in CI (.ci/test tsan) with one compute thread per model,
// since pthreadpool's own synchronization is not instrumented.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "include/tern.h"
#include "tests/support/bundle_util.h"

namespace {

constexpr const char* kBundle = "tiny-austen-packed.tern";

uint32_t compute_threads() {
  const char* env = std::getenv("TERN_TEST_THREADS");
  return env != nullptr ? static_cast<uint32_t>(std::atoi(env)) : 2;
}

int append(const char* text, size_t size, void* user) {
  static_cast<std::string*>(user)->append(text, size);
  return 0;
}

std::string generate(tern_model* model, const char* prompt, uint32_t n, tern_status* status) {
  tern_session_params sp = tern_session_default_params();
  sp.sampler.temperature = 0.0f;
  tern_session* s = nullptr;
  *status = tern_session_create(model, &sp, &s);
  if (*status != TERN_OK) return tern_last_error_message();
  tern_generate_params gp = tern_generate_default_params();
  gp.max_new_tokens = n;
  std::string out;
  *status = tern_generate(s, prompt, std::strlen(prompt), &gp, append, &out, nullptr);
  tern_session_free(s);
  return out;
}

TEST(Concurrency, TwoSessionsGenerateAtOnceExactlyAsAlone) {
  TERN_REQUIRE_BUNDLE(kBundle);
  tern_model_params mp = tern_model_default_params();
  mp.n_sessions = 2;
  mp.n_threads = compute_threads();
  mp.kv_mode = "q4";
  tern_model* model = nullptr;
  ASSERT_EQ(tern_model_load(tern::testing::bundle_path(kBundle).c_str(), &mp, &model), TERN_OK)
      << tern_last_error_message();
  const char* prompts[2] = {"It is a truth universally acknowledged", "Mr. Darcy walked into the room and"};
  std::string alone[2];
  for (int i = 0; i < 2; ++i) {
    tern_status s;
    alone[i] = generate(model, prompts[i], 40, &s);
    ASSERT_EQ(s, TERN_OK) << alone[i];
    ASSERT_FALSE(alone[i].empty());
  }
  ASSERT_NE(alone[0], alone[1]);
  for (int round = 0; round < 3; ++round) {
    std::string together[2];
    tern_status status[2] = {TERN_INTERNAL, TERN_INTERNAL};
    std::thread a([&] { together[0] = generate(model, prompts[0], 40, &status[0]); });
    std::thread b([&] { together[1] = generate(model, prompts[1], 40, &status[1]); });
    a.join();
    b.join();
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(status[i], TERN_OK) << together[i];
      EXPECT_EQ(together[i], alone[i]) << "round " << round << ", session " << i;
    }
  }
  tern_model_free(model);
}

TEST(Concurrency, AbortFromAnotherThreadStopsOnlyItsSession) {
  TERN_REQUIRE_BUNDLE(kBundle);
  tern_model_params mp = tern_model_default_params();
  mp.n_sessions = 2;
  mp.n_threads = compute_threads();
  mp.kv_mode = "q4";  // evicting: generation never ends for a full context
  tern_model* model = nullptr;
  ASSERT_EQ(tern_model_load(tern::testing::bundle_path(kBundle).c_str(), &mp, &model), TERN_OK);
  tern_session* long_one = nullptr;
  ASSERT_EQ(tern_session_create(model, nullptr, &long_one), TERN_OK);
  std::atomic<int> pieces{0};
  tern_status long_status = TERN_OK;
  std::thread runner([&] {
    tern_generate_params gp = tern_generate_default_params();
    gp.max_new_tokens = 1u << 30;
    auto count = [](const char*, size_t, void* user) {
      static_cast<std::atomic<int>*>(user)->fetch_add(1);
      return 0;
    };
    long_status = tern_generate(long_one, "Once", 4, &gp, count, &pieces, nullptr);
  });
  while (pieces.load() < 5) std::this_thread::yield();
  tern_status other_status;
  const std::string other = generate(model, "Emma", 20, &other_status);  // the second slot, meanwhile
  ASSERT_EQ(tern_session_request_abort(long_one), TERN_OK);
  runner.join();
  EXPECT_EQ(long_status, TERN_ABORTED);
  EXPECT_EQ(other_status, TERN_OK) << other;
  EXPECT_FALSE(other.empty());
  tern_session_free(long_one);
  tern_model_free(model);
}

// Session b sets the grammar session a compiled, so it copies a's (the model shares compiled
// grammars), while a generates under it on another thread: both write what they write alone.
TEST(Concurrency, AGrammarCopiedWhileItsOwnerGenerates) {
  TERN_REQUIRE_BUNDLE(kBundle);
  tern_model_params mp = tern_model_default_params();
  mp.n_sessions = 2;
  mp.n_threads = compute_threads();
  mp.grammar_bytes = 2u << 20;
  tern_model* model = nullptr;
  ASSERT_EQ(tern_model_load(tern::testing::bundle_path(kBundle).c_str(), &mp, &model), TERN_OK)
      << tern_last_error_message();
  const std::string grammar = "root ::= ( \"Yes\" | \"No\" | \"Perhaps\" | \"Never\" ) \", \" [a-z ]{8,40} \".\"";
  const char* prompts[2] = {"Will she marry him?", "Is the estate entailed?"};
  tern_generate_params gp = tern_generate_default_params();
  gp.max_new_tokens = 48;
  auto run = [&](tern_session* s, const char* prompt, tern_status* st) {
    std::string out;
    *st = tern_session_reset(s);  // each reply from a fresh conversation, as alone
    if (*st == TERN_OK) *st = tern_session_set_grammar(s, grammar.data(), grammar.size());
    if (*st == TERN_OK) *st = tern_generate(s, prompt, std::strlen(prompt), &gp, append, &out, nullptr);
    return *st == TERN_OK ? out : std::string(tern_last_error_message());
  };
  tern_session_params sp = tern_session_default_params();
  sp.sampler.temperature = 0.0f;
  std::string alone[2];
  for (int i = 0; i < 2; ++i) {
    tern_session* s = nullptr;
    ASSERT_EQ(tern_session_create(model, &sp, &s), TERN_OK);
    tern_status st;
    alone[i] = run(s, prompts[i], &st);
    ASSERT_EQ(st, TERN_OK) << alone[i];
    tern_session_free(s);
  }
  tern_session* a = nullptr;
  tern_session* b = nullptr;
  ASSERT_EQ(tern_session_create(model, &sp, &a), TERN_OK);
  ASSERT_EQ(tern_session_create(model, &sp, &b), TERN_OK);
  ASSERT_EQ(tern_session_set_grammar(a, grammar.data(), grammar.size()), TERN_OK);
  for (int round = 0; round < 3; ++round) {
    std::string together[2];
    tern_status status[2] = {TERN_INTERNAL, TERN_INTERNAL};
    std::thread ta([&] { together[0] = run(a, prompts[0], &status[0]); });
    std::thread tb([&] {
      ASSERT_EQ(tern_session_set_grammar(b, nullptr, 0), TERN_OK);  // so the next one is a copy again
      together[1] = run(b, prompts[1], &status[1]);
    });
    ta.join();
    tb.join();
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(status[i], TERN_OK) << together[i];
      EXPECT_EQ(together[i], alone[i]) << "round " << round << ", session " << i;
    }
  }
  tern_session_free(a);
  tern_session_free(b);
  tern_model_free(model);
}

}  // namespace
