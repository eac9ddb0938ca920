// The grammar engine on LLaMA-3's real vocabulary (tiny-llama3.tern: 128,256 tokens): token
// masks against a brute-force walk of every token's bytes through the automaton, at random
// reachable states of several grammars; characters split across tokens; end tokens; memory.
// The automaton itself is checked against Lark (grammar_lark_test.py).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/engine/model.h"
#include "runtime/structured/grammar.h"
#include "runtime/structured/json_schema.h"
#include "tests/support/bundle_util.h"
#include "tests/support/test_util.h"

namespace tern {
namespace {

constexpr size_t kRegionBytes = size_t{16} << 20;

class GrammarOnLlama3 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::bundle_exists("tiny-llama3.tern")) return;
    ModelParams params;
    params.grammar_bytes = 1;  // the vocabulary table; the tests compile into their own regions
    params.context_tokens = 64;
    auto loaded = Model::load(testing::bundle_path("tiny-llama3.tern").c_str(), params);
    ASSERT_TRUE(loaded.ok()) << last_error_message();
    model_ = std::move(loaded).value().release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  void SetUp() override {
    TERN_REQUIRE_BUNDLE("tiny-llama3.tern");
    ASSERT_NE(model_, nullptr);
    region_.reset(new uint8_t[kRegionBytes]);
  }
  const GrammarVocab& vocab() const { return model_->grammar_vocab(); }
  Error compile(Grammar& g, const std::string& text) {
    return g.compile(text.data(), text.size(), vocab(), region_.get(), kRegionBytes);
  }
  int32_t token_of(const std::string& bytes) const {
    for (uint32_t id = 0; id < vocab().size(); ++id) {
      if (vocab().length(id) == bytes.size() && std::memcmp(vocab().bytes(id), bytes.data(), bytes.size()) == 0) {
        return static_cast<int32_t>(id);
      }
    }
    return -1;
  }
  static bool allowed(const std::vector<uint32_t>& mask, int32_t id) { return (mask[id / 32] >> (id % 32)) & 1u; }

  static Model* model_;
  std::unique_ptr<uint8_t[]> region_;
};
Model* GrammarOnLlama3::model_ = nullptr;

std::string read_text(const std::string& path) { return testing::read_file_text(path); }

std::string schema_grammar(const std::string& schema) {
  size_t size = 0;
  (void)json_schema_to_grammar(schema.data(), schema.size(), nullptr, 0, &size);
  std::vector<char> text(size + 1);
  EXPECT_EQ(json_schema_to_grammar(schema.data(), schema.size(), text.data(), text.size(), &size), Error::Ok)
      << last_error_message();
  return std::string(text.data(), size);
}

// At each state of a random walk (a random allowed token each step), the mask must equal the
// brute force: every token's bytes walked through the automaton from the state (end tokens:
// allowed exactly where the grammar accepts; tokens without bytes never).
TEST_F(GrammarOnLlama3, MaskEqualsBruteForceOnTheFullVocabulary) {
  // Repetitions above 16 are counted in the parse state: their caches hold only while enough
  // rounds are left, so the walks go past the last rounds (tokens prefer length, below).
  const struct {
    const char* name;
    std::string text;
    int steps;
  } grammars[] = {
      {"json.gbnf", read_text(testing::repo_path("bench/data/json.gbnf")), 0},
      {"schema-20.json", schema_grammar(read_text(testing::repo_path("bench/data/schema-20.json"))), 0},
      {"words", "root ::= ( [A-Z] [a-z]{1,8} | \"東京\" | \"é\" [α-ω]* ) ( \", \" root | \".\" )", 0},
      {"numbers", "root ::= \"[\" ( num ( \",\" \" \"? num )* )? \"]\"\nnum ::= \"-\"? [0-9]+ ( \".\" [0-9]+ )?", 0},
      {"ambiguous", "root ::= ( \"ab\" | \"a\" \"b\"* | \"abc\" )* ( \"x\" | \"\\n\" )", 0},
      {"counted string", "root ::= \"\\\"\" ( [^\"\\\\] | \"\\\\\" [\"n] ){20,40} \"\\\"\" [0-9]{0,18} \".\"", 14},
      {"enum",
       "root ::= \"{\\\"city\\\": \" ( \"\\\"Toton\\\"\" | \"\\\"Tot\\\"\" | \"\\\"Totem pole\\\"\" | "
       "\"\\\"Ham\\\"\" | \"\\\"Hamka\\\"\" | \"\\\"Hamgorveka\\\"\" | \"\\\"Zürich\\\"\" | \"\\\"Zug\\\"\" | "
       "\"null\" | \"12\" | \"123\" ) \"}\"",
       8},
      {"counted words", "root ::= ( [a-z ]{17,24} \",\" ){17,} \"!\"", 14},
  };
  const bool slow = std::getenv("TERN_SLOW_EMULATION") != nullptr;
  const int default_steps = slow ? 2 : 6;
  std::mt19937 rng(26);
  std::vector<uint32_t> mask;
  uint64_t checked = 0;
  for (const auto& gr : grammars) {
    SCOPED_TRACE(gr.name);
    Grammar g;
    ASSERT_EQ(compile(g, gr.text), Error::Ok) << last_error_message();
    mask.assign(g.mask_words(), 0);
    const int steps = gr.steps > 0 && !slow ? gr.steps : default_steps;
    for (int step = 0; step < steps; ++step) {
      SCOPED_TRACE(step);
      auto n = g.compute_mask(g.state(), mask.data());
      ASSERT_TRUE(n.ok()) << last_error_message();
      std::vector<int32_t> allowed_ids;
      uint32_t mismatches = 0;
      for (uint32_t id = 0; id < vocab().size(); ++id) {
        bool expect = false;
        bool end = false;
        for (uint32_t e = 0; e < vocab().end_token_count(); ++e)
          end |= vocab().end_tokens()[e] == static_cast<int32_t>(id);
        if (end) {
          expect = g.state().accepting;
        } else if (vocab().length(id) > 0) {
          auto r = g.allows_bytes(g.state(), vocab().bytes(id), vocab().length(id));
          ASSERT_TRUE(r.ok()) << last_error_message();
          expect = *r;
        }
        const bool got = allowed(mask, static_cast<int32_t>(id));
        if (got != expect && ++mismatches <= 5) {
          ADD_FAILURE() << "token " << id << " '"
                        << std::string(reinterpret_cast<const char*>(vocab().bytes(id)), vocab().length(id))
                        << "': mask " << got << ", brute force " << expect;
        }
        if (got && !end) allowed_ids.push_back(static_cast<int32_t>(id));
        ++checked;
      }
      ASSERT_EQ(mismatches, 0u);
      EXPECT_EQ(*n, allowed_ids.size() + (g.state().accepting ? vocab().end_token_count() : 0));
      if (allowed_ids.empty()) break;  // complete: only the end is left
      // Prefer longer tokens now and then: they cross more symbols.
      int32_t pick = allowed_ids[rng() % allowed_ids.size()];
      for (int tries = 0; tries < 8 && vocab().length(static_cast<uint32_t>(pick)) < 3; ++tries) {
        pick = allowed_ids[rng() % allowed_ids.size()];
      }
      ASSERT_EQ(g.accept_token(pick), Error::Ok) << last_error_message();
    }
  }
  EXPECT_GT(checked, 4u * vocab().size());
}

TEST_F(GrammarOnLlama3, CharactersSplitAcrossTokens) {
  // "é" is C3 A9: the byte token C3 alone is allowed (a partial character), then A9 only.
  Grammar g;
  ASSERT_EQ(compile(g, "root ::= [é-ë]+ \"!\""), Error::Ok) << last_error_message();
  std::vector<uint32_t> mask(g.mask_words());
  const int32_t c3 = token_of("\xC3"), a9 = token_of("\xA9"), ac = token_of("\xAC"), e_acute = token_of("é");
  ASSERT_GE(c3, 0);
  ASSERT_GE(a9, 0);
  ASSERT_GE(e_acute, 0);
  ASSERT_TRUE(g.compute_mask(g.state(), mask.data()).ok());
  EXPECT_TRUE(allowed(mask, c3));
  EXPECT_TRUE(allowed(mask, e_acute));
  EXPECT_FALSE(allowed(mask, token_of("!")));
  ASSERT_EQ(g.accept_token(c3), Error::Ok);
  ASSERT_TRUE(g.compute_mask(g.state(), mask.data()).ok());
  EXPECT_TRUE(allowed(mask, a9));
  EXPECT_FALSE(allowed(mask, ac)) << "U+00EC is outside [é-ë]";
  EXPECT_FALSE(allowed(mask, e_acute));
  EXPECT_EQ(g.accept_token(ac), Error::InvalidArgument);
  ASSERT_EQ(g.accept_token(a9), Error::Ok);
  EXPECT_FALSE(g.accepting());
  // One token across several symbols: "é!" ends the sentence, then only an end token.
  const int32_t bang = token_of("!");
  ASSERT_EQ(g.accept_token(bang), Error::Ok);
  EXPECT_TRUE(g.finished());
  ASSERT_TRUE(g.compute_mask(g.state(), mask.data()).ok());
  for (uint32_t e = 0; e < vocab().end_token_count(); ++e) EXPECT_TRUE(allowed(mask, vocab().end_tokens()[e]));
}

TEST_F(GrammarOnLlama3, EndTokensOnlyWhereTheGrammarAccepts) {
  Grammar g;
  ASSERT_EQ(compile(g, "root ::= \"ab\" \"c\"?"), Error::Ok);
  ASSERT_GT(vocab().end_token_count(), 0u);
  const int32_t end = vocab().end_tokens()[0];
  std::vector<uint32_t> mask(g.mask_words());
  ASSERT_TRUE(g.compute_mask(g.state(), mask.data()).ok());
  EXPECT_FALSE(allowed(mask, end));
  EXPECT_EQ(g.accept_token(end), Error::InvalidArgument);
  const std::string ab = "ab";
  auto accepted = g.accept_bytes(reinterpret_cast<const uint8_t*>(ab.data()), ab.size());
  ASSERT_TRUE(accepted.ok() && *accepted);
  ASSERT_TRUE(g.compute_mask(g.state(), mask.data()).ok());
  EXPECT_TRUE(allowed(mask, end));
  EXPECT_TRUE(allowed(mask, token_of("c")));
  EXPECT_FALSE(g.finished());
}

// A compile is stopped from another thread between its vocabulary walks, and leaves no
// grammar; the same text compiles afterwards.
TEST_F(GrammarOnLlama3, CompileStopsWhenAborted) {
  // Copied-out string characters (4, the most that is not counted) after 48 different keys:
  // about 200 characters' places, each walked over the vocabulary (seconds of compile).
  std::string slow = "root ::= ( \"k0\" [^\"\\\\]{4}";
  for (int i = 1; i < 48; ++i) slow += " | \"k" + std::to_string(i) + "\" [^\"\\\\]{4}";
  slow += " )+\n";
  Grammar g;
  std::atomic<int> stop{1};
  EXPECT_EQ(g.compile(slow.data(), slow.size(), vocab(), region_.get(), kRegionBytes, &stop), Error::Aborted);
  EXPECT_FALSE(g.compiled());
  EXPECT_NE(std::string(last_error_message()).find("aborted"), std::string::npos) << last_error_message();
  // From another thread, once the compile has begun.
  stop = 0;
  std::atomic<int> started{0};
  Error e = Error::Ok;
  std::thread compiler([&] {
    started = 1;
    e = g.compile(slow.data(), slow.size(), vocab(), region_.get(), kRegionBytes, &stop);
  });
  while (started == 0) std::this_thread::yield();
  stop = 1;
  compiler.join();
  EXPECT_EQ(e, Error::Aborted) << last_error_message();
  EXPECT_FALSE(g.compiled());
  // The region is usable again.
  const std::string text = "root ::= ( \"k\" [0-9]{0,30} \",\" )+ \"!\"\n";
  stop = 0;
  EXPECT_EQ(g.compile(text.data(), text.size(), vocab(), region_.get(), kRegionBytes, &stop), Error::Ok)
      << last_error_message();
  // A session recompiles unless the text is the same to the byte (not a hash that may collide).
  EXPECT_TRUE(g.compiled_from(text.data(), text.size()));
  std::string other = text;
  other[other.size() - 3] = '?';
  EXPECT_FALSE(g.compiled_from(other.data(), other.size()));
  EXPECT_FALSE(g.compiled_from(text.data(), text.size() - 1));
}

// A copy of a compiled grammar (what a session makes of another's) allows exactly what the
// original allows at every step, and owes it nothing once made: the original's memory is
// wiped and the copy goes on.
TEST_F(GrammarOnLlama3, ACopyMatchesItsOriginalAndStandsAlone) {
  const std::string text = schema_grammar(read_text(testing::repo_path("bench/data/schema-20.json")));
  Grammar original, copy;
  ASSERT_EQ(compile(original, text), Error::Ok) << last_error_message();
  std::unique_ptr<uint8_t[]> other(new uint8_t[kRegionBytes]);
  ASSERT_EQ(copy.copy_from(original, other.get(), kRegionBytes), Error::Ok) << last_error_message();
  EXPECT_TRUE(copy.copied());
  EXPECT_FALSE(original.copied());
  EXPECT_TRUE(copy.compiled_from(text.data(), text.size()));
  EXPECT_EQ(copy.position_count(), original.position_count());
  std::vector<uint32_t> want(original.mask_words()), got(copy.mask_words());
  std::mt19937 rng(7);
  std::vector<int32_t> walk;
  for (int step = 0; step < 24; ++step) {
    ASSERT_TRUE(original.compute_mask(original.state(), want.data()).ok());
    ASSERT_TRUE(copy.compute_mask(copy.state(), got.data()).ok());
    ASSERT_EQ(got, want) << "step " << step;
    std::vector<int32_t> ids;
    for (uint32_t id = 0; id < vocab().size(); ++id) {
      if (allowed(want, static_cast<int32_t>(id)) && vocab().length(id) > 0) ids.push_back(static_cast<int32_t>(id));
    }
    if (ids.empty()) break;
    const int32_t pick = ids[rng() % ids.size()];
    walk.push_back(pick);
    ASSERT_EQ(original.accept_token(pick), Error::Ok);
    ASSERT_EQ(copy.accept_token(pick), Error::Ok);
  }
  // The original's region wiped: the copy replays the same walk with the same masks.
  std::memset(region_.get(), 0xA5, kRegionBytes);
  original.clear();
  ASSERT_EQ(compile(original, text), Error::Ok);
  copy.restart();
  for (const int32_t pick : walk) {
    ASSERT_TRUE(original.compute_mask(original.state(), want.data()).ok());
    ASSERT_TRUE(copy.compute_mask(copy.state(), got.data()).ok());
    ASSERT_EQ(got, want);
    ASSERT_EQ(original.accept_token(pick), Error::Ok);
    ASSERT_EQ(copy.accept_token(pick), Error::Ok);
  }
  // Too little memory for the copy is refused by name, and leaves no grammar.
  Grammar small;
  EXPECT_EQ(small.copy_from(original, other.get(), 64 << 10), Error::GrammarTooLarge);
  EXPECT_FALSE(small.compiled());
}

TEST_F(GrammarOnLlama3, TooLittleMemorySaysHowMuchItNeeds) {
  const std::string text = read_text(testing::repo_path("bench/data/json.gbnf"));
  Grammar g;
  // Following the messages: first the least it can start with, then what its caches need.
  size_t bytes = size_t{1} << 20;
  int tries = 0;
  Error e;
  while ((e = g.compile(text.data(), text.size(), vocab(), region_.get(), bytes)) == Error::GrammarTooLarge) {
    ASSERT_LT(++tries, 3) << last_error_message();
    EXPECT_FALSE(g.compiled());
    const std::string message = last_error_message();
    const size_t at = message.find("needs ");
    ASSERT_NE(at, std::string::npos) << message;
    size_t need = 0;
    const size_t digits = message.find_first_of("0123456789", at);
    ASSERT_EQ(std::sscanf(message.c_str() + digits, "%zu", &need), 1) << message;
    ASSERT_GT(need, bytes) << message;
    ASSERT_LE(need, kRegionBytes) << message;
    bytes = need;
  }
  ASSERT_EQ(e, Error::Ok) << last_error_message();
  EXPECT_EQ(tries, 2) << "first the working memory, then the caches";
  EXPECT_LE(g.used_bytes(), bytes);
  // A region too small for anything is refused, not overrun.
  EXPECT_EQ(g.compile(text.data(), text.size(), vocab(), region_.get(), 4096), Error::GrammarTooLarge);
}

}  // namespace
}  // namespace tern
