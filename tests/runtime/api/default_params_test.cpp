// A load with tern_model_default_params() and nothing else: a bounded context (the model's,
// at most 4,096 tokens; embedding models 8,192), a dense fp16 cache, and grammar memory in
// every session slot, all of it in the plan tern_plan() and the memory report give.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "include/tern.h"
#include "runtime/structured/json_schema.h"
#include "tests/support/bundle_util.h"

#ifdef TERN_DEFAULT_PARAMS_TEST_CONVERTER
#include "converter/import/synthetic.h"
#include "converter/writer/bundle_writer.h"
#endif

namespace {

std::string message() { return tern_last_error_message(); }

// The bundles the fixtures build: generative (runtime_make_bundles) and embedding (embedding_make_models).
const char* const kGenerative[] = {
    "tiny-austen-packed.tern",    "tiny-austen-bf16.tern",  "tiny-austen-base3.tern", "tiny-austen-calibrated.tern",
    "tiny-austen-2b4t-chat.tern", "tiny-austen-draft.tern", "tiny-llama3.tern"};
const char* const kEmbedding[] = {"embedding/qwen3.tern", "embedding/qwen3-gguf.tern", "embedding/qwen3-mean.tern",
                                  "embedding/gemma3.tern", "embedding/gemma3-gguf.tern"};

// 2 MiB + 48 bytes a token, in whole 64 KiB: the header's TERN_GRAMMAR_BYTES_AUTO.
uint64_t auto_grammar_bytes(uint64_t tokens) {
  const uint64_t step = 64 << 10;
  return ((2u << 20) + 48 * tokens + step - 1) / step * step;
}

struct Loaded {
  tern_model* model = nullptr;
  tern_model_info info{};
  tern_memory_report report{};
  ~Loaded() { tern_model_free(model); }
};

void load(const std::string& path, const tern_model_params& p, Loaded* out) {
  ASSERT_EQ(tern_model_load(path.c_str(), &p, &out->model), TERN_OK) << path << ": " << message();
  ASSERT_EQ(tern_model_get_info(out->model, &out->info), TERN_OK);
  ASSERT_EQ(tern_memory_report_get(out->model, &out->report), TERN_OK);
}

// tern_plan's row for one mode with `p`.
tern_plan_row plan_row(const std::string& path, const tern_model_params& p, const char* mode) {
  tern_plan_row row{};
  size_t count = 0;
  const char* modes[] = {mode};
  EXPECT_EQ(tern_plan(path.c_str(), &p, modes, 1, &row, 1, &count), TERN_OK) << path << ": " << message();
  EXPECT_EQ(row.status, TERN_OK) << path << ": " << message();
  return row;
}

TEST(DefaultParams, TheHeaderStatesTheDefaults) {
  EXPECT_EQ(TERN_DEFAULT_N_CTX, 4096);
  EXPECT_EQ(TERN_DEFAULT_EMBEDDING_N_CTX, 8192);
  const tern_model_params p = tern_model_default_params();
  EXPECT_EQ(p.memory_budget_bytes, 0u);
  EXPECT_EQ(p.n_ctx, 0u);
  EXPECT_EQ(p.kv_mode, nullptr);
  EXPECT_EQ(p.grammar_bytes, TERN_GRAMMAR_BYTES_AUTO);
  EXPECT_EQ(p.grammar_bytes, UINT64_MAX);
}

TEST(DefaultParams, GenerativeBundlesGetABoundedContextAndAnFp16Cache) {
  for (const char* name : kGenerative) {
    SCOPED_TRACE(name);
    TERN_REQUIRE_BUNDLE(name);
    const std::string path = tern::testing::bundle_path(name);
    Loaded m;
    load(path, tern_model_default_params(), &m);
    EXPECT_EQ(m.report.context_tokens, std::min<uint32_t>(m.info.max_context, 4096));
    EXPECT_STREQ(m.report.kv_mode, "f16");
    EXPECT_EQ(m.report.kv_compressed, 0);
    EXPECT_EQ(m.report.kv_evicting, 0);
    // K and V, two bytes each, per layer and KV head.
    EXPECT_EQ(m.report.kv_bytes_per_token, 2.0 * 2.0 * m.info.layers * m.info.kv_heads * m.info.head_dim);
    EXPECT_EQ(m.report.budget_bytes, 0u);
    // tern_plan plans what the load planned, grammar memory included.
    const tern_plan_row row = plan_row(path, tern_model_default_params(), "fp16");
    EXPECT_EQ(row.context_tokens, m.report.context_tokens);
    EXPECT_EQ(row.total_bytes, m.report.planned_total_bytes);
    EXPECT_EQ(row.arena_bytes, m.report.arena_bytes);
  }
}

TEST(DefaultParams, EmbeddingBundlesGetTheirLongestUsefulInputAndNoGrammar) {
  for (const char* name : kEmbedding) {
    SCOPED_TRACE(name);
    TERN_REQUIRE_BUNDLE(name);
    const std::string path = tern::testing::bundle_path(name);
    Loaded m;
    load(path, tern_model_default_params(), &m);
    ASSERT_GT(m.info.max_context, 8192u);  // the fixtures' models have a 32,768-token context
    EXPECT_EQ(m.report.context_tokens, 8192u);
    EXPECT_STREQ(m.report.kv_mode, "f16");
    // No grammar memory: the plan is the one with grammar_bytes 0.
    tern_model_params none = tern_model_default_params();
    none.grammar_bytes = 0;
    const tern_plan_row without = plan_row(path, none, "fp16");
    EXPECT_EQ(without.total_bytes, m.report.planned_total_bytes);
    tern_session* s = nullptr;
    ASSERT_EQ(tern_session_create(m.model, nullptr, &s), TERN_OK) << message();
    EXPECT_EQ(tern_session_set_grammar(s, "root ::= \"a\"", 12), TERN_INVALID_STATE);
    tern_session_free(s);
  }
}

TEST(DefaultParams, AnExplicitContextOrABudgetStillDecides) {
  const char* name = "embedding/qwen3.tern";
  TERN_REQUIRE_BUNDLE(name);
  const std::string path = tern::testing::bundle_path(name);
  {
    tern_model_params p = tern_model_default_params();
    p.n_ctx = 10000;  // above the default, below the model's: exactly this
    Loaded m;
    load(path, p, &m);
    EXPECT_EQ(m.report.context_tokens, 10000u);
  }
  {
    tern_model_params p = tern_model_default_params();
    p.n_ctx = 100;
    Loaded m;
    load(path, p, &m);
    EXPECT_EQ(m.report.context_tokens, 100u);
  }
  {
    // A budget and no context: as many as the budget holds, up to the model's 32,768.
    tern_model_params p = tern_model_default_params();
    p.memory_budget_bytes = uint64_t{4} << 30;
    Loaded m;
    load(path, p, &m);
    EXPECT_EQ(m.report.context_tokens, m.info.max_context);
    EXPECT_EQ(m.report.budget_bytes, p.memory_budget_bytes);
  }
  {
    // kv_type (deprecated) still says f32 when kv_mode is NULL.
    tern_model_params p = tern_model_default_params();
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
    p.kv_type = TERN_KV_F32;
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
    Loaded m;
    load(path, p, &m);
    EXPECT_STREQ(m.report.kv_mode, "f32");
    EXPECT_EQ(m.report.context_tokens, 8192u);
  }
}

#ifdef TERN_DEFAULT_PARAMS_TEST_CONVERTER
TEST(DefaultParams, AGenerativeModelWithALongContextIsCappedAt4096) {
  auto contents = tern::convert::synthetic_contents("tiny", tern::convert::ConvertOptions{});
  ASSERT_TRUE(contents.ok()) << message();
  contents->config.max_context = 16384;
  tern::testing::TempFile bundle(".tern");
  ASSERT_TRUE(tern::convert::write_bundle(bundle.path(), *contents).ok()) << message();
  Loaded m;
  load(bundle.path(), tern_model_default_params(), &m);
  EXPECT_EQ(m.info.max_context, 16384u);
  EXPECT_EQ(m.report.context_tokens, 4096u);
  tern_model_params p = tern_model_default_params();
  p.n_ctx = 16384;
  Loaded full;
  load(bundle.path(), p, &full);
  EXPECT_EQ(full.report.context_tokens, 16384u);
}
#endif

TEST(DefaultParams, TheGrammarMemoryIsSizedByTheVocabularyAndPlanned) {
  const char* name = "tiny-austen-packed.tern";
  TERN_REQUIRE_BUNDLE(name);
  const std::string path = tern::testing::bundle_path(name);
  Loaded m;
  load(path, tern_model_default_params(), &m);
  tern_model_params p = tern_model_default_params();
  p.n_sessions = 2;
  const tern_plan_row with = plan_row(path, p, "fp16");
  p.grammar_bytes = 0;
  const tern_plan_row without = plan_row(path, p, "fp16");
  p.grammar_bytes = auto_grammar_bytes(m.info.vocab_size);
  const tern_plan_row explicit_bytes = plan_row(path, p, "fp16");
  // "auto" is exactly the bytes the formula gives, asked for explicitly.
  EXPECT_EQ(with.total_bytes, explicit_bytes.total_bytes);
  EXPECT_EQ(with.session_bytes, explicit_bytes.session_bytes);
  // Each slot holds it and the schema converter's tables (64-byte alignment aside), and the
  // model its vocabulary table once.
  const size_t slot = auto_grammar_bytes(m.info.vocab_size) + tern::json_schema_work_bytes();
  EXPECT_GE(with.session_bytes - without.session_bytes, slot);
  EXPECT_LT(with.session_bytes - without.session_bytes, slot + 256);
  EXPECT_GT(with.arena_bytes - without.arena_bytes, 2 * slot);
  EXPECT_LT(with.arena_bytes - without.arena_bytes, 2 * slot + (1u << 20));
  // Loading at exactly that total works.
  tern_model_params at = tern_model_default_params();
  at.n_sessions = 2;
  at.memory_budget_bytes = with.total_bytes;
  at.n_ctx = with.context_tokens;
  Loaded budgeted;
  load(path, at, &budgeted);
  EXPECT_EQ(budgeted.report.planned_total_bytes, with.total_bytes);
}

// Sampling follows `grammar` on a default-loaded model: the reply is one of the grammar's sentences.
void generate_with_grammar(tern_model* model, const char* grammar, std::string* out) {
  tern_session* s = nullptr;
  ASSERT_EQ(tern_session_create(model, nullptr, &s), TERN_OK) << message();
  ASSERT_EQ(tern_session_set_grammar(s, grammar, std::char_traits<char>::length(grammar)), TERN_OK) << message();
  tern_generate_params gp = tern_generate_default_params();
  gp.max_new_tokens = 32;
  auto append = [](const char* text, size_t size, void* user) {
    static_cast<std::string*>(user)->append(text, size);
    return 0;
  };
  tern_generate_stats stats{};
  ASSERT_EQ(tern_generate(s, "It is", 5, &gp, append, out, &stats), TERN_OK) << message();
  EXPECT_EQ(stats.stop_reason, TERN_STOP_END_OF_GENERATION);
  tern_session_free(s);
}

TEST(DefaultParams, AGrammarNeedsNoLoadParameter) {
  TERN_REQUIRE_BUNDLE("tiny-austen-packed.tern");
  Loaded m;
  load(tern::testing::bundle_path("tiny-austen-packed.tern"), tern_model_default_params(), &m);
  std::string reply;
  generate_with_grammar(m.model, "root ::= \"yes\" | \"no\" | \"maybe so\"", &reply);
  EXPECT_TRUE(reply == "yes" || reply == "no" || reply == "maybe so") << reply;
}

TEST(DefaultParams, ToolCallAndJsonGrammarsFitTheAutoMemoryOfA128kVocabulary) {
  // tiny-llama3: LLaMA-3's 128,256 tokens, where the grammars need the most.
  TERN_REQUIRE_BUNDLE("tiny-llama3.tern");
  Loaded m;
  load(tern::testing::bundle_path("tiny-llama3.tern"), tern_model_default_params(), &m);
  ASSERT_EQ(m.info.vocab_size, 128256u);
  std::vector<std::string> grammars;
  const std::string data = std::string(TERN_SOURCE_DIR) + "/bench/data/";
  {
    const std::vector<uint8_t> g = tern::testing::read_file_bytes(data + "json.gbnf");
    grammars.emplace_back(g.begin(), g.end());
  }
  for (const char* schema_file : {"tool-call.json", "schema-20.json"}) {
    const std::vector<uint8_t> schema = tern::testing::read_file_bytes(data + schema_file);
    ASSERT_FALSE(schema.empty()) << schema_file;
    size_t size = 0;
    ASSERT_EQ(
        tern_json_schema_to_grammar(reinterpret_cast<const char*>(schema.data()), schema.size(), nullptr, 0, &size),
        TERN_OUT_OF_RANGE);
    std::string grammar(size + 1, '\0');
    ASSERT_EQ(tern_json_schema_to_grammar(reinterpret_cast<const char*>(schema.data()), schema.size(), &grammar[0],
                                          grammar.size(), &size),
              TERN_OK)
        << message();
    grammar.resize(size);
    grammars.push_back(grammar);
  }
  tern_session* s = nullptr;
  ASSERT_EQ(tern_session_create(m.model, nullptr, &s), TERN_OK) << message();
  for (const std::string& g : grammars) {
    EXPECT_EQ(tern_session_set_grammar(s, g.data(), g.size()), TERN_OK) << message();
  }
  tern_session_free(s);
}

TEST(DefaultParams, GrammarBytesZeroStillMeansNone) {
  TERN_REQUIRE_BUNDLE("tiny-austen-packed.tern");
  tern_model_params p = tern_model_default_params();
  p.grammar_bytes = 0;
  Loaded m;
  load(tern::testing::bundle_path("tiny-austen-packed.tern"), p, &m);
  tern_session* s = nullptr;
  ASSERT_EQ(tern_session_create(m.model, nullptr, &s), TERN_OK) << message();
  EXPECT_EQ(tern_session_set_grammar(s, "root ::= \"yes\"", 14), TERN_INVALID_STATE);
  EXPECT_NE(message().find("grammar_bytes"), std::string::npos) << message();
  tern_session_free(s);
}

// The plan at load, in one debug line.
struct Lines {
  std::vector<std::string> debug;
};

TEST(DefaultParams, TheLoadLogsThePlanAtDebugLevel) {
  TERN_REQUIRE_BUNDLE("tiny-austen-packed.tern");
  Lines lines;
  tern_set_log_callback(
      [](tern_log_level level, const char* text, void* user) {
        if (level == TERN_LOG_DEBUG) static_cast<Lines*>(user)->debug.emplace_back(text);
      },
      &lines);
  tern_set_log_level(TERN_LOG_DEBUG);
  Loaded m;
  load(tern::testing::bundle_path("tiny-austen-packed.tern"), tern_model_default_params(), &m);
  tern_set_log_level(TERN_LOG_WARNING);
  tern_set_log_callback(nullptr, nullptr);
  std::string plan;
  for (const std::string& l : lines.debug) {
    if (l.rfind("plan: ", 0) == 0) plan = l;
  }
  ASSERT_FALSE(plan.empty());
  EXPECT_NE(plan.find("context " + std::to_string(m.report.context_tokens) + " tokens (default)"), std::string::npos)
      << plan;
  EXPECT_NE(plan.find("kv f16"), std::string::npos) << plan;
  char part[64];
  std::snprintf(part, sizeof part, "grammar %.2f MiB", auto_grammar_bytes(m.info.vocab_size) / (1024.0 * 1024.0));
  EXPECT_NE(plan.find(part), std::string::npos) << plan;
  std::snprintf(part, sizeof part, "total %.2f MiB, no budget", m.report.planned_total_bytes / (1024.0 * 1024.0));
  EXPECT_NE(plan.find(part), std::string::npos) << plan;
}

}  // namespace
