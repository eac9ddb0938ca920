// Prefill, decode, sampling and generate must not touch the heap: this binary interposes
// malloc/new (alloc_counter.cpp) and counts every call made, from any thread, while they run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "include/tern.h"
#include "runtime/engine/model.h"
#include "runtime/engine/session.h"
#include "tests/support/alloc_counter.h"
#include "tests/support/bundle_util.h"

namespace {

using Counting = tern::test::AllocCounter;

int sink(const char* text, size_t size, void* user) {
  *static_cast<size_t*>(user) += size;
  return 0;
}

TEST(NoAlloc, TheShimCountsAllocations) {
  // Called through volatile pointers: the compiler may drop a malloc/free or new/delete pair
  // whose memory is never used, and the shim lives in another file now.
  void* (*volatile do_malloc)(size_t) = std::malloc;
  void (*volatile do_free)(void*) = std::free;
  void* (*volatile do_new)(size_t) = ::operator new;
  void (*volatile do_delete)(void*) noexcept = ::operator delete;
  Counting counting;
  do_free(do_malloc(16));
  do_delete(do_new(16));
  EXPECT_EQ(counting.calls(), 4);
}

// What a run changes from the default load: a KV mode and context (eviction, aging) and how
// many tokens it decodes one at a time before the generate() call.
struct RunOptions {
  const char* kv_mode = nullptr;
  uint32_t n_ctx = 0;
  int decode_steps = 12;
};

void run_without_allocating(const char* bundle, const char* source, uint32_t threads, RunOptions options = {}) {
  const std::string path = tern::testing::bundle_path(bundle);
  tern_model_params mp = tern_model_default_params();
  mp.n_threads = threads;
  mp.n_batch = 8;
  if (options.kv_mode != nullptr) mp.kv_mode = options.kv_mode;
  if (options.n_ctx != 0) mp.n_ctx = options.n_ctx;
  tern_model* model = nullptr;
  ASSERT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_OK) << tern_last_error_message();
  tern_session_params sp = tern_session_default_params();
  sp.sampler.temperature = 0.9f;
  sp.sampler.top_k = 0;  // full-vocabulary pass
  sp.sampler.repeat_penalty = 1.1f;
  tern_session* session = nullptr;
  ASSERT_EQ(tern_session_create(model, &sp, &session), TERN_OK) << tern_last_error_message();
  std::vector<int32_t> prompt(40);
  size_t n = 0;
  const char text[] = "It is a truth universally acknowledged, that a single man";
  ASSERT_EQ(tern_tokenize(model, text, sizeof text - 1, 1, 0, prompt.data(), prompt.size(), &n), TERN_OK);
  long calls = 0;
  size_t bytes = 0;
  {
    Counting counting;
    tern_status s = tern_prefill(session, prompt.data(), n);  // batches of 8: the GEMM path
    int decoded = 0;
    for (; decoded < options.decode_steps && s == TERN_OK; ++decoded) {
      int32_t token = 0;
      s = tern_sample(session, &token);
      if (s == TERN_OK) s = tern_decode(session, token);
    }
    EXPECT_EQ(s, TERN_OK) << tern_last_error_message();
    EXPECT_EQ(decoded, options.decode_steps);
    tern_generate_params gp = tern_generate_default_params();
    gp.max_new_tokens = 12;
    const char* stops[] = {"\n\n"};
    gp.stop_strings = stops;
    gp.n_stop_strings = 1;
    ASSERT_EQ(tern_session_reset(session), TERN_OK);
    EXPECT_EQ(tern_generate(session, text, sizeof text - 1, &gp, sink, &bytes, nullptr), TERN_OK)
        << tern_last_error_message();
    calls = counting.calls();
  }
  EXPECT_EQ(calls, 0) << "heap calls during prefill/decode/sample/generate with " << threads << " thread(s)";
  EXPECT_GT(bytes, 0u);
  tern_session_free(session);
  tern_model_free(model);
}

TEST(NoAlloc, PrefillDecodeSampleGenerateOneThread) {
  TERN_REQUIRE_BUNDLE("tiny-austen-packed.tern");
  run_without_allocating("tiny-austen-packed.tern", "", 1);
}

// Two turns of a drafting session while heap calls are counted: `prompt` with `stop` (a stop
// inside accepted drafts rolls them back), then `follow_up` without it, then (with `reset`)
// a session reset.
struct TwoTurns {
  long heap_calls = 0;
  tern_generate_stats first{}, second{};
};

TwoTurns generate_two_turns(tern_session* session, const char* prompt, const char* stop, const char* follow_up,
                            uint32_t max_new_tokens, bool reset) {
  tern_generate_params gp = tern_generate_default_params();
  gp.max_new_tokens = max_new_tokens;
  gp.stop_strings = &stop;
  gp.n_stop_strings = 1;
  TwoTurns t;
  size_t bytes = 0;
  Counting counting;
  EXPECT_EQ(tern_generate(session, prompt, std::strlen(prompt), &gp, sink, &bytes, &t.first), TERN_OK)
      << tern_last_error_message();
  gp.n_stop_strings = 0;
  EXPECT_EQ(tern_generate(session, follow_up, std::strlen(follow_up), &gp, sink, &bytes, &t.second), TERN_OK)
      << tern_last_error_message();
  if (reset) {
    EXPECT_EQ(tern_session_reset(session), TERN_OK);
  }
  t.heap_calls = counting.calls();
  return t;
}

// Speculative decoding: drafting, the batched verification with every row's logits, the
// roll-back and the final truncation stay inside the session's arena.
TEST(NoAlloc, GenerateWithDraftingAllocatesNothing) {
  TERN_REQUIRE_BUNDLE("tiny-austen-packed.tern");
  const std::string path = tern::testing::bundle_path("tiny-austen-packed.tern");
  for (const char* mode : {"f32", "q4"}) {
    tern_model_params mp = tern_model_default_params();
    mp.kv_mode = mode;
    mp.n_ctx = 256;
    mp.n_draft = 8;
    tern_model* model = nullptr;
    ASSERT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_OK) << tern_last_error_message();
    tern_session_params sp = tern_session_default_params();
    sp.sampler.temperature = 0.0f;
    sp.n_draft = 8;
    tern_session* session = nullptr;
    ASSERT_EQ(tern_session_create(model, &sp, &session), TERN_OK) << tern_last_error_message();
    const TwoTurns t = generate_two_turns(
        session, "It is a truth universally acknowledged, that a single man. It is a truth universally",
        "United States, and", " The", 60, false);
    EXPECT_EQ(t.heap_calls, 0) << "heap calls while generating with drafting, kv " << mode;
    EXPECT_GT(t.second.accepted_tokens, 0u) << "no draft was accepted: the test would not exercise verification";
    tern_session_free(session);
    tern_model_free(model);
  }
}

// Grammar-constrained generation: the token masks (caches, walks of the uncertain tokens
// against the stacks), the parse stacks and their compaction, and drafts checked against the
// grammar all stay inside the session's grammar memory. The grammar is compiled before
// counting (into the same memory: compilation does not allocate either, but it is setup).
TEST(NoAlloc, ConstrainedGenerationAllocatesNothing) {
  TERN_REQUIRE_BUNDLE("tiny-austen-packed.tern");
  tern_model_params mp = tern_model_default_params();
  mp.n_ctx = 256;
  mp.n_draft = 4;
  mp.grammar_bytes = 2 << 20;
  tern_model* model = nullptr;
  ASSERT_EQ(tern_model_load(tern::testing::bundle_path("tiny-austen-packed.tern").c_str(), &mp, &model), TERN_OK)
      << tern_last_error_message();
  const char schema[] =
      R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 16}, "age": {"type": "integer"},
          "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 4}}})";
  std::vector<char> grammar(1 << 14);
  size_t size = 0;
  ASSERT_EQ(tern_json_schema_to_grammar(schema, sizeof schema - 1, grammar.data(), grammar.size(), &size), TERN_OK);
  tern_session_params sp = tern_session_default_params();
  sp.sampler.temperature = 1.0f;
  sp.sampler.top_k = 0;
  sp.n_draft = 4;
  sp.grammar = grammar.data();
  tern_session* session = nullptr;
  ASSERT_EQ(tern_session_create(model, &sp, &session), TERN_OK) << tern_last_error_message();
  const TwoTurns t = generate_two_turns(session, "{\"name\": \"Emma\", \"age\": 21}\n", "\n\n", "\n", 120, true);
  EXPECT_EQ(t.heap_calls, 0) << "heap calls while generating under a grammar";
  EXPECT_GT(t.first.generated_tokens + t.second.generated_tokens, 10u);
  tern_session_free(session);
  tern_model_free(model);
}

// Log-probabilities: tern_sample_logprobs with the most alternatives, under penalties, a logit
// bias and a grammar, and generate()'s token callback asking for them, stay in the arena.
void count_token(int32_t, float logprob, const tern::TokenLogprob*, uint32_t n_top, void* user) {
  *static_cast<double*>(user) += logprob + n_top;
}

TEST(NoAlloc, LogprobsAllocateNothing) {
  TERN_REQUIRE_BUNDLE("tiny-austen-packed.tern");
  const std::string path = tern::testing::bundle_path("tiny-austen-packed.tern");
  tern_model_params mp = tern_model_default_params();
  mp.n_ctx = 256;
  mp.grammar_bytes = 4 << 20;
  tern_model* model = nullptr;
  ASSERT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_OK) << tern_last_error_message();
  tern_model_info info;
  ASSERT_EQ(tern_model_get_info(model, &info), TERN_OK);
  tern_session_params sp = tern_session_default_params();
  sp.sampler.temperature = 0.9f;
  sp.sampler.repeat_penalty = 1.2f;
  sp.sampler.presence_penalty = 0.3f;
  const char grammar[] = "root ::= [a-z ,]+";
  sp.grammar = grammar;
  tern_session* session = nullptr;
  ASSERT_EQ(tern_session_create(model, &sp, &session), TERN_OK) << tern_last_error_message();
  const tern_logit_bias bias[] = {{5, -INFINITY}, {17, 1.5f}};
  ASSERT_EQ(tern_session_set_logit_bias(session, bias, 2), TERN_OK);
  std::vector<int32_t> prompt(40);
  size_t n = 0;
  const char text[] = "It is a truth universally acknowledged";
  ASSERT_EQ(tern_tokenize(model, text, sizeof text - 1, 1, 0, prompt.data(), prompt.size(), &n), TERN_OK);
  double sum = 0.0;
  int sampled = 0;
  long calls = 0;
  {
    Counting counting;
    tern_status s = tern_prefill(session, prompt.data(), n);
    for (; sampled < 24 && s == TERN_OK; ++sampled) {
      int32_t token = 0;
      tern_token_logprob chosen{};
      tern_token_logprob top[20];
      size_t n_top = 0;
      s = tern_sample_logprobs(session, 20, &token, &chosen, top, &n_top);
      sum += chosen.logprob + static_cast<double>(n_top);
      if (token == info.eos_id || token == info.eot_id) break;  // the grammar is complete
      if (s == TERN_OK) s = tern_decode(session, token);
    }
    EXPECT_EQ(s, TERN_OK) << tern_last_error_message();
    calls = counting.calls();
  }
  EXPECT_EQ(calls, 0) << "heap calls in tern_sample_logprobs";
  EXPECT_GT(sampled, 2);
  EXPECT_TRUE(std::isfinite(sum));
  tern_session_free(session);
  tern_model_free(model);

  tern::ModelParams params;
  params.context_tokens = 256;
  auto cpp_model = tern::Model::load(path.c_str(), params);
  ASSERT_TRUE(cpp_model.ok()) << tern_last_error_message();
  auto cpp_session = (*cpp_model)->create_session(tern::SamplerParams{});
  ASSERT_TRUE(cpp_session.ok()) << tern_last_error_message();
  tern::GenerateOptions o;
  o.max_new_tokens = 16;
  o.logprobs_top = 20;
  o.on_token = count_token;
  o.token_user = &sum;
  {
    Counting counting;
    EXPECT_EQ((*cpp_session)->generate(text, sizeof text - 1, o, nullptr, nullptr, nullptr), tern::Error::Ok)
        << tern_last_error_message();
    calls = counting.calls();
  }
  EXPECT_EQ(calls, 0) << "heap calls in generate() with its token callback asking for logprobs";
  EXPECT_TRUE(std::isfinite(sum));
  (*cpp_model)->destroy_session(*cpp_session);
}

// Aging tiers: blocks leave the window at 4 bits, have their codes cut to 2 bits once they are
// 32 tokens older, and the oldest aged ones are evicted, all inside the cache's arena. 132
// positions = 4 sinks + 1 block at 4 bits + 1 aged block + the 32 + 32 window slots: blocks
// age from position 100 and are evicted from 132; prompt + 140 tokens pass every stage.
TEST(NoAlloc, DecodeWithAgingTiersAllocatesNothing) {
  TERN_REQUIRE_BUNDLE("tiny-austen-packed.tern");
  run_without_allocating("tiny-austen-packed.tern", "", 1, RunOptions{"q4>2@32", 132, 140});
}

// Heavy-hitter eviction with per-head budgets from the bundle's calibration: blocks gather
// attention, heads evict different blocks and attention re-positions queries over the gaps,
// all inside the cache's arena. 132 positions: prompt + 140 tokens evict many times over.
// (One thread: the pool's spinning made two cost 28 emulated seconds under qemu.)
TEST(NoAlloc, DecodeWithHeavyHitterEvictionAllocatesNothing) {
  TERN_REQUIRE_BUNDLE("tiny-austen-calibrated.tern");
  run_without_allocating("tiny-austen-calibrated.tern", "", 1, RunOptions{"q4/hh", 132, 140});
}

// A draft model: its session (taken from its own slot when the target session is created,
// before counting), its catch-up prefills, drafts, roll-backs, and speculative sampling's
// distributions stay inside the two models' arenas. Greedy with a dense cache, sampled with a
// compressed one.
// The draft is tiny-austen's first four layers (tern-convert --keep-layers 4).
TEST(NoAlloc, GenerateWithADraftModelAllocatesNothing) {
  TERN_REQUIRE_BUNDLE("tiny-austen-packed.tern");
  TERN_REQUIRE_BUNDLE("tiny-austen-draft.tern");
  struct Case {
    const char* mode;
    float temperature;
  };
  for (const Case c : {Case{"f32", 0.0f}, Case{"q4", 0.8f}}) {
    const char* mode = c.mode;
    const float temperature = c.temperature;
    tern_model_params mp = tern_model_default_params();
    mp.kv_mode = mode;
    mp.n_ctx = 256;
    mp.n_draft = 4;
    tern_model *model = nullptr, *draft = nullptr;
    ASSERT_EQ(tern_model_load(tern::testing::bundle_path("tiny-austen-packed.tern").c_str(), &mp, &model), TERN_OK)
        << tern_last_error_message();
    mp.n_draft = 0;
    ASSERT_EQ(tern_model_load(tern::testing::bundle_path("tiny-austen-draft.tern").c_str(), &mp, &draft), TERN_OK)
        << tern_last_error_message();
    tern_session_params sp = tern_session_default_params();
    sp.sampler.temperature = temperature;
    sp.n_draft = 4;
    sp.draft_model = draft;
    tern_session* session = nullptr;
    ASSERT_EQ(tern_session_create(model, &sp, &session), TERN_OK) << tern_last_error_message();
    // The stop may land inside accepted drafts: target and draft sessions both roll back.
    const TwoTurns t = generate_two_turns(
        session, "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be",
        "I am", " And the", 40, true);
    EXPECT_EQ(t.heap_calls, 0) << "heap calls while generating with a draft model, kv " << mode << ", temperature "
                               << temperature;
    EXPECT_GT(t.first.accepted_tokens + t.second.accepted_tokens, 0u)
        << "no draft accepted: verification not exercised";
    tern_session_free(session);
    tern_model_free(model);
    tern_model_free(draft);
  }
}

TEST(NoAlloc, PrefillDecodeSampleGenerateTwoThreads) {
  TERN_REQUIRE_BUNDLE("tiny-austen-packed.tern");
  run_without_allocating("tiny-austen-packed.tern", "", 2);
}

// The base-3 layout's kernels and their dispatch; two threads run both the fused products
// (q/k/v, gate/up) and the single ones (o, down).
TEST(NoAlloc, Base3BundleTwoThreads) {
  TERN_REQUIRE_BUNDLE("tiny-austen-base3.tern");
  run_without_allocating("tiny-austen-base3.tern", "", 2);
}

}  // namespace

// Embedding models (made by the embedding_make_models fixture): texts packed into batches
// that span the small context (the cache starts over), every output format, a stored
// prompt, truncation, and two threads — all inside the session's arena.
TEST(NoAlloc, EmbedAllocatesNothing) {
  for (const char* name : {"embedding/qwen3.tern", "embedding/gemma3.tern"}) {
    TERN_REQUIRE_BUNDLE(name);
    tern_model_params mp = tern_model_default_params();
    mp.n_threads = 2;
    mp.n_ctx = 48;
    mp.n_batch = 16;
    tern_model* model = nullptr;
    ASSERT_EQ(tern_model_load(tern::testing::bundle_path(name).c_str(), &mp, &model), TERN_OK)
        << tern_last_error_message();
    tern_session* session = nullptr;
    ASSERT_EQ(tern_session_create(model, nullptr, &session), TERN_OK) << tern_last_error_message();
    const char* texts[] = {"What is BitNet?",
                           "It is a truth universally acknowledged, that a single man in possession "
                           "of a good fortune, must be in want of a wife.",
                           "我想在apple工作1314151天",
                           "Cafe\xCC\x81",
                           "x",
                           "The quick brown fox jumps over the lazy dog, again and again and again."};
    const size_t n = sizeof texts / sizeof texts[0];
    float out[6 * 64];
    float scales[6];
    tern_embed_stats stats{};
    long calls = 0;
    {
      Counting counting;
      for (tern_embed_format format : {TERN_EMBED_FLOAT32, TERN_EMBED_INT8, TERN_EMBED_BINARY}) {
        tern_embed_params ep = tern_embed_default_params();
        ep.format = format;
        ep.dimensions = format == TERN_EMBED_FLOAT32 ? 0 : 32;
        ep.prompt_name = format == TERN_EMBED_INT8 ? "query" : nullptr;
        ep.truncate = 1;
        EXPECT_EQ(tern_embed(session, texts, nullptr, n, &ep, out, sizeof out, scales, &stats), TERN_OK)
            << tern_last_error_message();
      }
      // Token-id inputs, with a stored prompt tokenized in front.
      const int32_t ids0[] = {5, 6, 7, 8}, ids1[] = {9};
      const int32_t* lists[] = {ids0, ids1};
      const size_t counts[] = {4, 1};
      tern_embed_params ep = tern_embed_default_params();
      ep.prompt_name = "query";
      EXPECT_EQ(tern_embed_tokens(session, lists, counts, 2, &ep, out, sizeof out, nullptr, nullptr), TERN_OK)
          << tern_last_error_message();
      calls = counting.calls();
    }
    EXPECT_EQ(calls, 0) << name;
    EXPECT_GE(stats.n_batches, 3u) << name;
    tern_session_free(session);
    tern_model_free(model);
  }
}

int count_events(const tern_chat_event* e, void* user) {
  *static_cast<size_t*>(user) += e->size;
  return 0;
}

// A chat request with tools and a JSON-Schema reply, twice (a schema converted and compiled,
// then another request whose prompt extends the first's): the prompt, the composed schema,
// its grammar and the reply all stay in the session's slot.
TEST(NoAlloc, ChatCompletionsWithToolsAndSchemas) {
  TERN_REQUIRE_BUNDLE("tiny-austen-2b4t-chat.tern");
  const std::string path = tern::testing::bundle_path("tiny-austen-2b4t-chat.tern");
  tern_model_params mp = tern_model_default_params();
  mp.n_threads = 2;
  mp.n_ctx = 512;
  mp.grammar_bytes = 4u << 20;
  tern_model* model = nullptr;
  ASSERT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_OK) << tern_last_error_message();
  tern_session* session = nullptr;
  ASSERT_EQ(tern_session_create(model, nullptr, &session), TERN_OK);
  const tern_chat_tool tools[] = {{"get_weather", "A forecast",
                                   R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})"}};
  const tern_chat_turn turns[] = {{"user", "Weather in Oslo?", nullptr, 0, nullptr},
                                  {"assistant", "Let me see.", nullptr, 0, nullptr},
                                  {"user", "And tomorrow?", nullptr, 0, nullptr}};
  tern_chat_request r = tern_chat_default_request();
  r.messages = turns;
  r.n_messages = 1;
  r.tools = tools;
  r.n_tools = 1;
  r.tool_choice = TERN_TOOL_CHOICE_REQUIRED;
  r.max_tokens = 24;
  size_t bytes = 0;
  long calls = 0;
  tern_chat_result first{}, second{};
  {
    Counting counting;
    EXPECT_EQ(tern_chat_complete(session, &r, count_events, &bytes, &first), TERN_OK) << tern_last_error_message();
    r.n_messages = 3;
    r.tool_choice = TERN_TOOL_CHOICE_AUTO;
    r.response_format = TERN_RESPONSE_JSON_OBJECT;
    EXPECT_EQ(tern_chat_complete(session, &r, count_events, &bytes, &second), TERN_OK) << tern_last_error_message();
    calls = counting.calls();
  }
  EXPECT_EQ(calls, 0) << "heap calls during tern_chat_complete";
  EXPECT_GT(bytes, 0u);
  EXPECT_GT(second.cached_tokens, 0u);
  tern_session_free(session);
  tern_model_free(model);
}
