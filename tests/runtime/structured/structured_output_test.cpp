// Grammar-constrained generation through the C API with tiny-austen: composition with the
// sampler, penalties, logit bias and speculative decoding; the errors an app can meet; the
// memory the grammar takes in the plan. (The engine's masks and automaton have their own
// tests: grammar_test.cpp, grammar_lark_test.py; the schemas json_schema_test.py.)
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "include/tern.h"
#include "runtime/structured/json_schema.h"
#include "tests/support/bundle_util.h"

namespace {

using nlohmann::json;

constexpr const char* kSchema =
    R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 99}, "tags": {"type": "array",
        "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3}}, "required": ["name", "age", "tags"],
        "additionalProperties": false})";

std::string grammar_of(const char* schema) {
  size_t size = 0;
  EXPECT_EQ(tern_json_schema_to_grammar(schema, std::strlen(schema), nullptr, 0, &size), TERN_OUT_OF_RANGE);
  std::vector<char> buf(size + 1);
  EXPECT_EQ(tern_json_schema_to_grammar(schema, std::strlen(schema), buf.data(), buf.size(), &size), TERN_OK)
      << tern_last_error_message();
  EXPECT_EQ(buf[size], '\0');
  return std::string(buf.data(), size);
}

int append(const char* text, size_t size, void* user) {
  static_cast<std::string*>(user)->append(text, size);
  return 0;
}

// The output is an object of kSchema's shape.
void expect_record(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "not JSON: " << text;
  ASSERT_TRUE(j.is_object()) << text;
  ASSERT_EQ(j.size(), 3u) << text;
  ASSERT_TRUE(j["name"].is_string()) << text;
  EXPECT_LE(j["name"].get<std::string>().size(), 4u * 12u) << text;  // 12 characters
  ASSERT_TRUE(j["age"].is_number_integer()) << text;
  EXPECT_GE(j["age"].get<int>(), 0);
  EXPECT_LE(j["age"].get<int>(), 99);
  ASSERT_TRUE(j["tags"].is_array()) << text;
  EXPECT_LE(j["tags"].size(), 3u);
  for (const json& t : j["tags"]) {
    EXPECT_TRUE(t == "red" || t == "green" || t == "blue") << text;
  }
}

class StructuredOutput : public ::testing::Test {
 protected:
  void SetUp() override {
    TERN_REQUIRE_BUNDLE("tiny-austen-packed.tern");
    grammar_ = grammar_of(kSchema);
  }
  void TearDown() override {
    tern_session_free(session_);
    tern_model_free(model_);
  }
  void load(uint64_t grammar_bytes, uint32_t n_draft = 0) {
    tern_model_params mp = tern_model_default_params();
    mp.grammar_bytes = grammar_bytes;
    mp.n_draft = n_draft;
    mp.n_ctx = 512;
    ASSERT_EQ(tern_model_load(tern::testing::bundle_path("tiny-austen-packed.tern").c_str(), &mp, &model_), TERN_OK)
        << tern_last_error_message();
  }
  void create(const tern_sampler_params& sampler, const char* grammar, uint32_t n_draft = 0) {
    tern_session_params sp = tern_session_default_params();
    sp.sampler = sampler;
    sp.grammar = grammar;
    sp.n_draft = n_draft;
    ASSERT_EQ(tern_session_create(model_, &sp, &session_), TERN_OK) << tern_last_error_message();
  }
  std::string generate(const std::string& prompt, uint32_t max_tokens, tern_generate_stats* stats) {
    tern_generate_params gp = tern_generate_default_params();
    gp.max_new_tokens = max_tokens;
    std::string out;
    const tern_status s = tern_generate(session_, prompt.data(), prompt.size(), &gp, append, &out, stats);
    EXPECT_EQ(s, TERN_OK) << tern_last_error_message();
    return out;
  }

  std::string grammar_;
  tern_model* model_ = nullptr;
  tern_session* session_ = nullptr;
};

tern_sampler_params sampling(uint64_t seed) {
  tern_sampler_params p = tern_sampler_default_params();
  p.temperature = 1.0f;
  p.seed = seed;
  return p;
}

TEST_F(StructuredOutput, EverySampledOutputFollowsTheSchemaAndEnds) {
  load(2 << 20);
  create(sampling(1), grammar_.c_str());
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(seed);
    tern_sampler_params p = sampling(seed);
    // Every transform at once: the mask applies before them all.
    p.top_k = 20 + static_cast<int32_t>(seed);
    p.top_p = 0.9f;
    p.min_p = 0.02f;
    p.repeat_penalty = 1.2f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.3f;
    ASSERT_EQ(tern_session_set_sampler(session_, &p), TERN_OK);
    ASSERT_EQ(tern_session_reset(session_), TERN_OK);
    tern_generate_stats st{};
    const std::string out = generate("A record of the Bennet family:", 300, &st);
    EXPECT_EQ(st.stop_reason, TERN_STOP_END_OF_GENERATION) << out;
    expect_record(out);
  }
}

TEST_F(StructuredOutput, EachGenerateCallIsOneSentence) {
  load(2 << 20);
  create(sampling(7), grammar_.c_str());
  std::string prompt = "Mr. Darcy:";
  for (int turn = 0; turn < 3; ++turn) {
    tern_generate_stats st{};
    const std::string out = generate(prompt, 300, &st);
    EXPECT_EQ(st.stop_reason, TERN_STOP_END_OF_GENERATION);
    expect_record(out);
    prompt = "\nAnother one:";  // the session goes on; the grammar starts again
  }
}

TEST_F(StructuredOutput, LogitBiasAndGrammarCompose) {
  load(2 << 20);
  // A GBNF grammar of two words; a strong bias on the token "n" picks the second one.
  const char* grammar = "root ::= \"yes\" | \"no\"";
  create(sampling(3), grammar);
  std::vector<int32_t> ids(8);
  size_t n = 0;
  ASSERT_EQ(tern_tokenize(model_, "n", 1, 0, 0, ids.data(), ids.size(), &n), TERN_OK);
  ASSERT_EQ(n, 1u);
  const tern_logit_bias favour_n = {ids[0], 50.0f};
  ASSERT_EQ(tern_session_set_logit_bias(session_, &favour_n, 1), TERN_OK);
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    tern_sampler_params p = sampling(seed);
    ASSERT_EQ(tern_session_set_sampler(session_, &p), TERN_OK);
    ASSERT_EQ(tern_session_reset(session_), TERN_OK);
    tern_generate_stats st{};
    EXPECT_EQ(generate("Answer:", 8, &st), "no");
    EXPECT_EQ(st.stop_reason, TERN_STOP_END_OF_GENERATION);
  }
  // A bias that bans everything the grammar allows leaves nothing to sample: an error, not a
  // token outside the grammar.
  std::vector<tern_logit_bias> ban;
  for (const char* word : {"y", "ye", "yes", "n", "no"}) {
    if (tern_tokenize(model_, word, std::strlen(word), 0, 0, ids.data(), ids.size(), &n) == TERN_OK && n == 1) {
      ban.push_back({ids[0], -INFINITY});
    }
  }
  ASSERT_EQ(tern_session_set_logit_bias(session_, ban.data(), ban.size()), TERN_OK);
  ASSERT_EQ(tern_session_reset(session_), TERN_OK);
  std::string out;
  tern_generate_params gp = tern_generate_default_params();
  gp.max_new_tokens = 4;
  const char prompt[] = "Answer:";
  EXPECT_EQ(tern_generate(session_, prompt, sizeof prompt - 1, &gp, append, &out, nullptr), TERN_INVALID_STATE);
  EXPECT_NE(std::string(tern_last_error_message()).find("grammar allows no token"), std::string::npos);
}

// Greedy with prompt-lookup drafts gives exactly the text plain greedy decoding gives under
// the grammar; drafts the grammar refuses are never verified.
TEST_F(StructuredOutput, SpeculativeDecodingKeepsTheGrammarAndTheText) {
  load(2 << 20, 8);
  tern_sampler_params greedy = tern_sampler_default_params();
  greedy.temperature = 0.0f;
  create(greedy, grammar_.c_str(), 0);
  // A prompt full of records gives prompt lookup something to draft from.
  const std::string prompt =
      "{\"name\": \"Elizabeth\", \"age\": 20, \"tags\": [\"red\"]}\n{\"name\": \"Jane\", \"age\": 22, \"tags\": "
      "[\"blue\", \"green\"]}\n{\"name\": \"Mary\", \"age\": 18, \"tags\": []}\n";
  tern_generate_stats plain{};
  const std::string expected = generate(prompt, 200, &plain);
  expect_record(expected);
  for (uint32_t k : {1u, 4u, 8u}) {
    SCOPED_TRACE(k);
    ASSERT_EQ(tern_session_reset(session_), TERN_OK);
    ASSERT_EQ(tern_session_set_draft(session_, k), TERN_OK);
    tern_generate_stats st{};
    EXPECT_EQ(generate(prompt, 200, &st), expected);
    EXPECT_GT(st.drafted_tokens, 0u);
    EXPECT_EQ(st.stop_reason, plain.stop_reason);
  }
  // Sampling with drafts: speculative sampling under the mask, still within the grammar.
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    tern_sampler_params p = sampling(seed);
    ASSERT_EQ(tern_session_set_sampler(session_, &p), TERN_OK);
    ASSERT_EQ(tern_session_reset(session_), TERN_OK);
    ASSERT_EQ(tern_session_set_draft(session_, 4), TERN_OK);
    tern_generate_stats st{};
    expect_record(generate(prompt, 300, &st));
    EXPECT_EQ(st.stop_reason, TERN_STOP_END_OF_GENERATION);
  }
}

TEST_F(StructuredOutput, ErrorsSayWhatIsWrong) {
  load(0);
  create(tern_sampler_default_params(), nullptr);
  // No grammar memory reserved at load.
  EXPECT_EQ(tern_session_set_grammar(session_, grammar_.data(), grammar_.size()), TERN_INVALID_STATE);
  EXPECT_NE(std::string(tern_last_error_message()).find("grammar_bytes"), std::string::npos);
  tern_session_free(session_);
  session_ = nullptr;
  tern_model_free(model_);
  model_ = nullptr;

  load(2 << 20);
  create(tern_sampler_default_params(), nullptr);
  const char bad[] = "root ::= \"a\"\nitem ::= \"b\" (";
  EXPECT_EQ(tern_session_set_grammar(session_, bad, sizeof bad - 1), TERN_INVALID_GRAMMAR);
  EXPECT_NE(std::string(tern_last_error_message()).find("line 2"), std::string::npos) << tern_last_error_message();
  const char invalid_utf8[] = "root ::= \"\xC3\x28\"";
  EXPECT_EQ(tern_session_set_grammar(session_, invalid_utf8, sizeof invalid_utf8 - 1), TERN_INVALID_UTF8);
  // A session whose grammar failed has none: generation is unconstrained.
  tern_generate_stats st{};
  (void)generate("It is a truth", 4, &st);
  EXPECT_EQ(st.generated_tokens, 4u);
  // The same grammar at creation.
  tern_session_free(session_);
  session_ = nullptr;
  tern_session_params sp = tern_session_default_params();
  sp.grammar = bad;
  EXPECT_EQ(tern_session_create(model_, &sp, &session_), TERN_INVALID_GRAMMAR);
  EXPECT_EQ(session_, nullptr);

  // Schemas: unsupported keywords are named, with their place.
  size_t size = 0;
  char buf[256];
  const char pattern[] = R"({"type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}})";
  EXPECT_EQ(tern_json_schema_to_grammar(pattern, sizeof pattern - 1, buf, sizeof buf, &size), TERN_UNSUPPORTED_SCHEMA);
  EXPECT_NE(std::string(tern_last_error_message()).find("'pattern'"), std::string::npos) << tern_last_error_message();
  EXPECT_NE(std::string(tern_last_error_message()).find("/zip"), std::string::npos) << tern_last_error_message();
  const char not_json[] = "{\"type\": ";
  EXPECT_EQ(tern_json_schema_to_grammar(not_json, sizeof not_json - 1, buf, sizeof buf, &size), TERN_INVALID_ARGUMENT);
}

TEST_F(StructuredOutput, TheGrammarMemoryIsInThePlan) {
  const std::string path = tern::testing::bundle_path("tiny-austen-packed.tern");
  tern_model_params mp = tern_model_default_params();
  mp.n_ctx = 256;
  mp.n_sessions = 2;
  mp.grammar_bytes = 0;  // the default is grammar memory sized by the vocabulary
  tern_plan_row without{}, with{};
  size_t count = 0;
  const char* modes[] = {"f32"};
  ASSERT_EQ(tern_plan(path.c_str(), &mp, modes, 1, &without, 1, &count), TERN_OK) << tern_last_error_message();
  mp.grammar_bytes = 3 << 20;
  ASSERT_EQ(tern_plan(path.c_str(), &mp, modes, 1, &with, 1, &count), TERN_OK);
  // Both slots reserve it and the schema converter's tables beside it (the chat engine converts
  // in the slot), and the model keeps the vocabulary's byte table once.
  const size_t slot = (3u << 20) + tern::json_schema_work_bytes();
  EXPECT_GE(with.arena_bytes - without.arena_bytes, 2u * slot);
  EXPECT_LE(with.arena_bytes - without.arena_bytes, 2u * slot + (1u << 20));
  // Loading at exactly the planned total works; the report counts it with the sampler.
  mp.memory_budget_bytes = with.total_bytes;
  ASSERT_EQ(tern_model_load(path.c_str(), &mp, &model_), TERN_OK) << tern_last_error_message();
  create(tern_sampler_default_params(), grammar_.c_str());
  tern_memory_report r{};
  ASSERT_EQ(tern_memory_report_get(model_, &r), TERN_OK);
  EXPECT_GE(r.arena_sampler_bytes, 3u << 20);
  EXPECT_EQ(r.context_tokens, 256u);
}

}  // namespace
