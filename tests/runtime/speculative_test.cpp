// Speculative decoding (prompt lookup + batched verification) must produce exactly the text,
// the position, the token history and the next token of one-token-at-a-time greedy decoding,
// in every KV mode, with stops landing inside accepted drafts, and with eviction. Every case
// also checks that drafts were accepted, so equality is not the trivial no-draft path.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "runtime/include/tern.h"
#include "tests/runtime/bundle_util.h"

namespace {

constexpr const char* kAusten = "tiny-austen-packed.tern";
constexpr const char* kAustenSource = "models/tiny-austen/packed/model.safetensors";
constexpr const char* kLlama = "bitllama2c-3M.tern";
constexpr const char* kLlamaSource = "models/bitllama2c-3M/bit_model.bin";

std::string message() { return tern_last_error_message(); }

struct GenerateRun {
  std::string text;
  std::vector<int32_t> history;
  uint32_t position = 0;
  int32_t next = -1;  // the token sampling picks afterwards: the logits left behind
  tern_generate_stats stats{};
};

int append(const char* text, size_t size, void* user) {
  static_cast<std::string*>(user)->append(text, size);
  return 0;
}

struct Request {
  const char* mode = "f32";
  uint32_t ctx = 256;
  int32_t eviction = -1;
  uint32_t n_draft = 0;
  uint32_t max_new = 80;
  std::vector<const char*> stops;
  float temperature = 0.0f;
  std::vector<std::string> prompts;  // generate() calls on one session, one after the other
};

GenerateRun run(const char* bundle, const Request& r) {
  GenerateRun out;
  const std::string path = tern::testing::bundle_path(bundle);
  tern_model_params mp = tern_model_default_params();
  mp.kv_mode = r.mode;
  mp.n_ctx = r.ctx;
  mp.kv_eviction = r.eviction;
  mp.n_draft = r.n_draft;
  tern_model* model = nullptr;
  EXPECT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_OK) << message();
  if (model == nullptr) return out;
  tern_session_params sp = tern_session_default_params();
  sp.sampler.temperature = r.temperature;
  sp.sampler.seed = 7;
  sp.n_draft = r.n_draft;
  tern_session* s = nullptr;
  EXPECT_EQ(tern_session_create(model, &sp, &s), TERN_OK) << message();
  if (s != nullptr) {
    for (const std::string& prompt : r.prompts) {
      tern_generate_params gp = tern_generate_default_params();
      gp.max_new_tokens = r.max_new;
      gp.stop_strings = r.stops.empty() ? nullptr : r.stops.data();
      gp.n_stop_strings = r.stops.size();
      tern_generate_stats st{};
      EXPECT_EQ(tern_generate(s, prompt.data(), prompt.size(), &gp, append, &out.text, &st), TERN_OK) << message();
      out.text += "|";
      out.stats.generated_tokens += st.generated_tokens;
      out.stats.decoded_tokens += st.decoded_tokens;
      out.stats.drafted_tokens += st.drafted_tokens;
      out.stats.accepted_tokens += st.accepted_tokens;
      out.stats.verify_steps += st.verify_steps;
      out.stats.stop_reason = st.stop_reason;
    }
    EXPECT_EQ(tern_session_position(s, &out.position), TERN_OK);
    std::vector<int32_t> h(4096);
    size_t n = 0;
    EXPECT_EQ(tern_session_history(s, h.data(), h.size(), &n), TERN_OK) << message();
    h.resize(n);
    out.history = h;
    EXPECT_EQ(tern_sample(s, &out.next), TERN_OK) << message();
    tern_session_free(s);
  }
  tern_model_free(model);
  return out;
}

// The same request with and without drafting: everything equal, and drafts accepted.
void expect_same_as_plain(const char* bundle, Request r, uint32_t n_draft, bool expect_accepted = true) {
  r.n_draft = 0;
  const GenerateRun plain = run(bundle, r);
  r.n_draft = n_draft;
  const GenerateRun spec = run(bundle, r);
  SCOPED_TRACE(std::string(bundle) + " kv " + r.mode + " n_draft " + std::to_string(n_draft));
  EXPECT_EQ(spec.text, plain.text);
  EXPECT_EQ(spec.position, plain.position);
  EXPECT_EQ(spec.history, plain.history);
  EXPECT_EQ(spec.next, plain.next);
  EXPECT_EQ(spec.stats.generated_tokens, plain.stats.generated_tokens);
  EXPECT_EQ(spec.stats.decoded_tokens, plain.stats.decoded_tokens);
  EXPECT_EQ(spec.stats.stop_reason, plain.stats.stop_reason);
  EXPECT_EQ(plain.stats.verify_steps, 0u);
  if (expect_accepted) {
    EXPECT_GT(spec.stats.accepted_tokens, 0u) << "no draft accepted: nothing was verified";
    EXPECT_GT(spec.stats.verify_steps, 0u);
    EXPECT_LE(spec.stats.accepted_tokens, spec.stats.drafted_tokens);
  }
}

const char* kAustenPrompt =
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want "
    "of a wife. It is a truth universally acknowledged";

TEST(Speculative, GreedyTextIsTheOneTokenAtATimeTextInEveryKvMode) {
  TERN_REQUIRE_BUNDLE(kAusten, kAustenSource);
  for (const char* mode : {"f32", "fp16", "q8", "q4", "q2", "k4v2"}) {
    Request r;
    r.mode = mode;
    r.prompts = {kAustenPrompt};
    for (uint32_t k : {1u, 4u, 15u}) expect_same_as_plain(kAusten, r, k);
  }
}

TEST(Speculative, AnotherModelAndTokenizer) {
  TERN_REQUIRE_BUNDLE(kLlama, kLlamaSource);
  for (const char* mode : {"f32", "q4"}) {
    Request r;
    r.mode = mode;
    r.max_new = 120;
    r.prompts = {"Once upon a time, there was a little girl named Lily. She loved to play outside. One day, Lily"};
    expect_same_as_plain(kLlama, r, 8);
  }
}

TEST(Speculative, StopsInsideAcceptedDraftsLeaveTheStateOfPlainDecoding) {
  TERN_REQUIRE_BUNDLE(kAusten, kAustenSource);
  // The greedy continuation repeats "the United States, and to": a stop string and short
  // token limits end generation in the middle of accepted drafts.
  for (const char* mode : {"f32", "q4"}) {
    Request r;
    r.mode = mode;
    r.prompts = {kAustenPrompt, " And the", " It is a truth"};
    r.stops = {"States, and to the"};
    expect_same_as_plain(kAusten, r, 8);
    r.stops.clear();
    for (uint32_t max_new : {1u, 2u, 5u, 17u}) {
      r.max_new = max_new;
      expect_same_as_plain(kAusten, r, 8, max_new > 2);
    }
  }
}

TEST(Speculative, EvictingCachesPastTheirCapacity) {
  TERN_REQUIRE_BUNDLE(kAusten, kAustenSource);
  // A 100-position cache and 300 new tokens: blocks leave the exact window and are evicted
  // between verification passes, never inside one.
  for (const char* mode : {"q4", "f32"}) {
    Request r;
    r.mode = mode;
    r.ctx = 100;
    r.eviction = 1;
    r.max_new = 300;
    r.prompts = {kAustenPrompt};
    expect_same_as_plain(kAusten, r, 8);
  }
}

TEST(Speculative, SamplingDecodesOneTokenAtATime) {
  TERN_REQUIRE_BUNDLE(kAusten, kAustenSource);
  Request r;
  r.temperature = 0.8f;
  r.prompts = {kAustenPrompt};
  r.n_draft = 8;
  const GenerateRun spec = run(kAusten, r);
  EXPECT_EQ(spec.stats.verify_steps, 0u) << "drafting is for greedy decoding only";
  r.n_draft = 0;
  EXPECT_EQ(run(kAusten, r).text, spec.text);
}

TEST(Speculative, BadDraftSizesAreRefused) {
  TERN_REQUIRE_BUNDLE(kAusten, kAustenSource);
  const std::string path = tern::testing::bundle_path(kAusten);
  tern_model_params mp = tern_model_default_params();
  mp.n_ctx = 64;
  mp.n_draft = 16;  // above the most (15)
  tern_model* model = nullptr;
  EXPECT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_INVALID_ARGUMENT);
  EXPECT_NE(message().find("draft"), std::string::npos) << message();
  mp.n_draft = 8;
  mp.n_batch = 8;  // the verification batch (8 drafts + 1) must fit the prefill batch
  EXPECT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_INVALID_ARGUMENT);
  mp.n_batch = 64;
  mp.n_draft = 4;
  ASSERT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_OK) << message();
  tern_session_params sp = tern_session_default_params();
  sp.n_draft = 5;  // above the model's room
  tern_session* s = nullptr;
  EXPECT_EQ(tern_session_create(model, &sp, &s), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);
  sp.n_draft = 4;
  ASSERT_EQ(tern_session_create(model, &sp, &s), TERN_OK) << message();
  EXPECT_EQ(tern_session_set_draft(s, 5), TERN_INVALID_ARGUMENT);
  EXPECT_EQ(tern_session_set_draft(s, 0), TERN_OK);
  EXPECT_EQ(tern_session_set_draft(nullptr, 1), TERN_INVALID_ARGUMENT);
  // The room costs exactly its token list: in the plan, and in what a live session takes
  // from the arena.
  auto measure = [&](uint32_t n_draft, tern_memory_report* r, uint32_t* vocab) {
    tern_model_params p = mp;
    p.n_draft = n_draft;
    tern_model* m = nullptr;
    ASSERT_EQ(tern_model_load(path.c_str(), &p, &m), TERN_OK) << message();
    tern_session* live = nullptr;
    ASSERT_EQ(tern_session_create(m, nullptr, &live), TERN_OK) << message();
    EXPECT_EQ(tern_memory_report_get(m, r), TERN_OK);
    tern_model_info info{};
    EXPECT_EQ(tern_model_get_info(m, &info), TERN_OK);
    *vocab = info.vocab_size;
    tern_session_free(live);
    tern_model_free(m);
  };
  tern_session_free(s);
  tern_model_free(model);
  tern_memory_report with{}, without{};
  uint32_t vocab = 0;
  measure(4, &with, &vocab);
  measure(0, &without, &vocab);
  (void)vocab;
  const size_t ids = 5 * sizeof(int32_t);
  const size_t expected = (ids + 63) / 64 * 64 + 64;
  EXPECT_EQ(with.arena_bytes - without.arena_bytes, expected);
  EXPECT_LE(with.arena_scratch_bytes - without.arena_scratch_bytes, expected);
  EXPECT_GE(with.arena_scratch_bytes - without.arena_scratch_bytes, ids);
}

}  // namespace
