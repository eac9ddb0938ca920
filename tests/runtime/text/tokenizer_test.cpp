// The runtime tokenizer (imported through the converter and read back from its
// FlatBuffer table) against reference ids: llama.cpp's tokenizer test vectors, samples
// encoded by Hugging Face tokenizers / SentencePiece, and tiny-austen's reference inputs.
#include <gtest/gtest.h>
#include <utf8proc.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <new>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "converter/tokenizer/tokenizer_host.h"
#include "converter/tokenizer/tokenizer_import.h"
#include "runtime/base/arena.h"
#include "runtime/text/tokenizer.h"
#include "runtime/text/unicode.h"
#include "schema/tokenizer_generated.h"
#include "tests/support/test_util.h"

// GCC flags free() on memory from the replaced operator new below, which is malloc'd.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

// Counts heap allocations while `g_count_allocations` is set, to show encode() and the
// decoder never allocate.
static std::atomic<bool> g_count_allocations{false};
static std::atomic<size_t> g_allocations{0};
void* operator new(size_t size) {
  if (g_count_allocations) ++g_allocations;
  void* p = std::malloc(size ? size : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace tern {
namespace {

using convert::HostTokenizer;
using testing::shared_path;

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

// llama.cpp's test-tokenizer-0 format: texts separated by "\n__ggml_vocab_test__\n" (the
// file ends with a separator), one line of space-separated ids per text, no BOS.
std::vector<Case> read_ggml_cases(const std::string& stem) {
  const std::string inp = testing::read_file_text(stem + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Case> cases;
  for (size_t pos = 0; pos < inp.size();) {
    size_t end = inp.find(sep, pos);
    if (end == std::string::npos) break;
    cases.push_back({inp.substr(pos, end - pos), {}});
    pos = end + sep.size();
  }
  std::ifstream out(stem + ".out");
  std::string line;
  for (auto& c : cases) {
    std::getline(out, line);
    std::istringstream ids(line);
    int32_t id;
    while (ids >> id) c.ids.push_back(id);
  }
  return cases;
}

std::vector<Case> read_jsonl_cases(const std::string& path) {
  std::vector<Case> cases;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    cases.push_back({j["text"].get<std::string>(), j["ids"].get<std::vector<int32_t>>()});
  }
  return cases;
}

std::unique_ptr<HostTokenizer> load(const std::string& path) {
  auto t = HostTokenizer::load(path);
  EXPECT_TRUE(t.ok()) << last_error_message();
  return t.ok() ? std::move(t).value() : nullptr;
}

void expect_cases(HostTokenizer& tok, const std::vector<Case>& cases, const char* what) {
  size_t id_mismatches = 0, round_trip_failures = 0;
  for (const auto& c : cases) {
    auto ids = tok.encode(c.text);
    ASSERT_TRUE(ids.ok()) << last_error_message();
    if (*ids != c.ids) {
      ++id_mismatches;
      ADD_FAILURE() << what << ": ids differ for " << ::testing::PrintToString(c.text.substr(0, 80));
    }
    auto text = tok.decode(*ids);
    ASSERT_TRUE(text.ok());
    if (*text != c.text) {
      ++round_trip_failures;
      ADD_FAILURE() << what << ": decode(encode(x)) != x for " << ::testing::PrintToString(c.text.substr(0, 80));
    }
  }
  EXPECT_EQ(id_mismatches, 0u);
  EXPECT_EQ(round_trip_failures, 0u);
}

// One ground-truth file: llama.cpp's .gguf.inp/.out pair under ../shared (third-party), or a
// .jsonl sample (ours: the repository's LLaMA-3 one, ../shared's LLaMA-2 one beside its
// third-party tokenizer), with the number of cases it holds.
void expect_ground_truth(HostTokenizer& tok, const std::string& path, size_t count) {
  const bool ggml = path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
  TERN_REQUIRE_FILE(ggml ? path + ".inp" : path);
  const auto cases = ggml ? read_ggml_cases(path) : read_jsonl_cases(path);
  ASSERT_EQ(cases.size(), count);
  expect_cases(tok, cases, path.c_str());
}

std::string ground_truth(const std::string& file) { return shared_path("tokenizers/ground-truth/" + file); }

class Llama3 : public ::testing::Test {
 protected:
  // Parsing the 9 MB tokenizer.json takes a while: once per suite.
  static void TearDownTestSuite() { shared_.reset(); }
  void SetUp() override {
    TERN_REQUIRE_FILE(testing::llama3_tokenizer_json());
    if (!shared_) shared_ = load(testing::llama3_tokenizer_json());
    ASSERT_NE(shared_, nullptr);
    tok_ = shared_.get();
  }
  std::vector<int32_t> ids(const std::string& text, bool parse_special = false) {
    auto r = tok_->encode(text, false, parse_special);
    EXPECT_TRUE(r.ok()) << last_error_message();
    return r.ok() ? *r : std::vector<int32_t>{};
  }
  static std::unique_ptr<HostTokenizer> shared_;
  HostTokenizer* tok_ = nullptr;
};
std::unique_ptr<HostTokenizer> Llama3::shared_;

class Llama2 : public ::testing::Test {
 protected:
  void SetUp() override {
    TERN_REQUIRE_SHARED("tokenizers/llama2/tokenizer.model");
    tok_ = load(shared_path("tokenizers/llama2/tokenizer.model"));
    ASSERT_NE(tok_, nullptr);
  }
  std::unique_ptr<HostTokenizer> tok_;
};

TEST_F(Llama3, ImportedMetadata) {
  Tokenizer& t = tok_->tokenizer();
  EXPECT_EQ(t.kind(), TokenizerKind::ByteLevelBpe);
  EXPECT_EQ(t.vocab_size(), 128256);
  EXPECT_EQ(t.bos_id(), 128000);
  EXPECT_EQ(t.eos_id(), 128001);
  EXPECT_EQ(t.eot_id(), 128009);
  EXPECT_TRUE(t.is_control(128009));
  // Byte-level pieces are stored as raw bytes: "Ġthe" is " the".
  const int32_t the = t.find_piece(" the", 4);
  ASSERT_GE(the, 0);
  EXPECT_EQ(std::string(t.piece(the).data, t.piece(the).size), " the");
  EXPECT_FALSE(tok_->table()->chat_template()->str().empty());
}

TEST_F(Llama3, GgmlVocabTestVectors) {
  TERN_REQUIRE_SHARED("tokenizers/ground-truth/ggml-vocab-llama-bpe.gguf.inp");
  expect_ground_truth(*tok_, ground_truth("ggml-vocab-llama-bpe.gguf"), 46);
}

TEST_F(Llama3, HuggingFaceSamples) { expect_ground_truth(*tok_, testing::llama3_samples(), 327); }

TEST_F(Llama3, EmptyInputGivesNoIdsOrJustBos) {
  EXPECT_TRUE(ids("").empty());
  auto with_bos = tok_->encode("", true);
  ASSERT_TRUE(with_bos.ok());
  EXPECT_EQ(*with_bos, std::vector<int32_t>{128000});
}

TEST_F(Llama3, InvalidUtf8BecomesReplacementCharacters) {
  // Each invalid byte is one U+FFFD; the result equals encoding the replaced text.
  EXPECT_EQ(ids("caf\xE9 au lait"), ids("caf\xEF\xBF\xBD au lait"));
  EXPECT_EQ(ids("\xF0\x9F\x98"), ids("\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"));
  EXPECT_EQ(ids("x\xC0\xAFy"), ids("x\xEF\xBF\xBD\xEF\xBF\xBDy"));
  auto text = tok_->decode(ids("a\xFF"));
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "a\xEF\xBF\xBD");
}

TEST_F(Llama3, EmbeddedNulIsAnOrdinaryCharacter) {
  const std::string text("a\0b\0\0 c", 7);
  auto got = ids(text);
  // NUL is neither letter, number nor space: it is split like punctuation.
  const int32_t nul = tok_->tokenizer().find_piece("\0", 1);
  ASSERT_GE(nul, 0);
  EXPECT_NE(std::find(got.begin(), got.end(), nul), got.end());
  auto back = tok_->decode(got);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, text);
}

// decode(encode(x)) is x with each invalid byte replaced by U+FFFD, for arbitrary bytes;
// the replaced text is computed with utf8proc's validator, not the tokenizer's.
TEST_F(Llama3, ArbitraryBytesRoundTripWithReplacement) {
  std::mt19937 rng(2024);
  static const char* fragments[] = {"\xC3\xA9",
                                    "\xE2\x96\x81",
                                    "\xF0\x9F\x98\x80",
                                    "\xED\xA0\x80",
                                    "\xC0\xAF",
                                    "\xE2\x82",
                                    "\xF4\x90\x80\x80",
                                    "'s",
                                    " ",
                                    "\n",
                                    "\r\n",
                                    "12345",
                                    "word"};
  const size_t iterations = std::getenv("TERN_SLOW_EMULATION") ? 200 : 2000;
  size_t failures = 0;
  for (size_t i = 0; i < iterations; ++i) {
    std::string text;
    for (int k = std::uniform_int_distribution<int>(0, 12)(rng); k > 0; --k) {
      if (std::uniform_int_distribution<int>(0, 2)(rng) == 0) {
        text += static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
      } else {
        text += fragments[std::uniform_int_distribution<int>(0, 12)(rng)];
      }
    }
    std::string replaced;
    const auto* s = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
    for (size_t pos = 0; pos < text.size();) {
      utf8proc_int32_t cp;
      const auto n = utf8proc_iterate(s + pos, static_cast<utf8proc_ssize_t>(text.size() - pos), &cp);
      if (n > 0) {
        replaced.append(text, pos, static_cast<size_t>(n));
        pos += static_cast<size_t>(n);
      } else {
        replaced += "\xEF\xBF\xBD";
        pos += 1;
      }
    }
    auto got = tok_->encode(text);
    ASSERT_TRUE(got.ok()) << last_error_message();
    auto want = tok_->encode(replaced);
    ASSERT_TRUE(want.ok());
    auto back = tok_->decode(*got);
    ASSERT_TRUE(back.ok());
    if ((*got != *want || *back != replaced) && ++failures <= 5) {
      ADD_FAILURE() << ::testing::PrintToString(text) << " decoded as " << ::testing::PrintToString(*back);
    }
  }
  EXPECT_EQ(failures, 0u);
}

TEST_F(Llama3, SpecialTokensOnlyWhenAsked) {
  const std::string text = "<|begin_of_text|>Hello<|eot_id|>";
  auto parsed = ids(text, true);
  auto hello = ids("Hello");
  std::vector<int32_t> expected{128000};
  expected.insert(expected.end(), hello.begin(), hello.end());
  expected.push_back(128009);
  EXPECT_EQ(parsed, expected);
  auto plain = ids(text, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 128000), 0);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 128009), 0);
  auto back = tok_->decode(plain);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, text);
  // Control tokens decode to nothing.
  auto skipped = tok_->decode(parsed);
  ASSERT_TRUE(skipped.ok());
  EXPECT_EQ(*skipped, "Hello");
}

TEST_F(Llama3, OutputTooSmallReportsNeededCount) {
  const std::string text = "It is a truth universally acknowledged";
  const auto all = ids(text);
  ASSERT_GT(all.size(), 3u);
  int32_t out[3];
  size_t needed = 0;
  auto r = tok_->tokenizer().encode(text.data(), text.size(), false, false, out, 3, &needed);
  EXPECT_EQ(r.error(), Error::OutOfRange);
  EXPECT_EQ(needed, all.size());
  EXPECT_NE(std::string(last_error_message()).find(std::to_string(all.size())), std::string::npos);
  EXPECT_EQ(std::vector<int32_t>(out, out + 3), std::vector<int32_t>(all.begin(), all.begin() + 3));
}

TEST_F(Llama3, MegabyteWithoutSpaces) {
  const size_t size = std::getenv("TERN_SLOW_EMULATION") ? (64 << 10) : (1 << 20);
  // Digits split into groups of three, so the default scratch suffices and the ids are
  // the group's ids repeated.
  std::string digits;
  while (digits.size() < size) digits += "123";
  Tokenizer& t = tok_->tokenizer();
  std::vector<int32_t> out(size);
  auto n = t.encode(digits.data(), digits.size(), false, false, out.data(), out.size());
  ASSERT_TRUE(n.ok()) << last_error_message();
  const auto group = ids("123");
  ASSERT_EQ(group.size(), 1u);
  EXPECT_EQ(*n, digits.size() / 3);
  EXPECT_EQ(std::count(out.begin(), out.begin() + *n, group[0]), static_cast<long>(*n));

  // One 1 MB letter run: the default scratch is too small, a caller scratch works.
  std::string letters;
  const std::string word = "Supercalifragilistic";
  while (letters.size() < size) letters += word;
  auto too_big = t.encode(letters.data(), letters.size(), false, false, out.data(), out.size());
  EXPECT_EQ(too_big.error(), Error::BudgetTooSmall);
  auto got = tok_->encode(letters);
  ASSERT_TRUE(got.ok()) << last_error_message();
  auto back = tok_->decode(*got);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, letters);
  EXPECT_LT(got->size(), letters.size() / 2);  // merges did happen
}

TEST_F(Llama3, EncodeAndDecodeDoNotAllocate) {
  const std::string text = "Emma Woodhouse, handsome, clever, and rich, with a comfortable home 😀 \xE2\x96\x81 ½";
  Tokenizer& t = tok_->tokenizer();
  int32_t out[128];
  char buf[4096];
  TokenDecoder decoder(t);
  g_allocations = 0;
  g_count_allocations = true;
  auto n = t.encode(text.data(), text.size(), true, true, out, 128);
  size_t decoded = 0;
  for (size_t i = 0; n.ok() && i < *n; ++i) {
    auto m = decoder.push(out[i], buf + decoded, sizeof buf - decoded);
    if (m.ok()) decoded += *m;
  }
  g_count_allocations = false;
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(g_allocations.load(), 0u);
  EXPECT_EQ(std::string(buf, decoded), text);
}

TEST_F(Llama3, StreamingDecoderEmitsOnlyWholeCharacters) {
  TERN_REQUIRE_FILE(testing::llama3_samples());
  auto cases = read_jsonl_cases(testing::llama3_samples());
  Tokenizer& t = tok_->tokenizer();
  size_t split_chars = 0;
  for (const auto& c : cases) {
    TokenDecoder decoder(t);
    std::string all;
    char buf[4096];
    for (int32_t id : c.ids) {
      auto n = decoder.push(id, buf, sizeof buf);
      ASSERT_TRUE(n.ok());
      // Every chunk is complete, valid UTF-8 on its own.
      for (size_t i = 0; i < *n;) {
        auto d = unicode::decode_utf8(reinterpret_cast<const uint8_t*>(buf + i), *n - i);
        ASSERT_TRUE(d.valid) << "partial character emitted";
        i += d.length;
      }
      const PieceView p = t.piece(id);
      if (*n != p.size) ++split_chars;
      all.append(buf, *n);
    }
    auto n = decoder.flush(buf, sizeof buf);
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, 0u);
    EXPECT_EQ(all, c.text);
  }
  EXPECT_GT(split_chars, 0u);  // the samples do split characters across tokens
}

TEST_F(Llama3, DecoderRejectsBadIdsAndSmallBuffers) {
  TokenDecoder decoder(tok_->tokenizer());
  char buf[8];
  EXPECT_EQ(decoder.push(-1, buf, sizeof buf).error(), Error::InvalidToken);
  EXPECT_EQ(decoder.push(128256, buf, sizeof buf).error(), Error::InvalidToken);
  const int32_t the = tok_->tokenizer().find_piece(" the", 4);
  EXPECT_EQ(decoder.push(the, buf, 2).error(), Error::OutOfRange);
  // A lone lead byte followed by flush: one U+FFFD.
  const char lead = '\xE2';
  const int32_t lead_id = tok_->tokenizer().find_piece(&lead, 1);
  char big[64];
  auto n = decoder.push(lead_id, big, sizeof big);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  auto f = decoder.flush(big, sizeof big);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(std::string(big, *f), "\xEF\xBF\xBD");
}

TEST_F(Llama3, ArenaPlanIsExact) {
  const schema::Tokenizer* table = tok_->table();
  const size_t need = Tokenizer::required_arena_bytes(table);
  std::vector<uint8_t> memory(need);
  ArenaAllocator arena(memory.data(), memory.size());
  auto t = Tokenizer::create(table, arena);
  ASSERT_TRUE(t.ok()) << last_error_message();
  EXPECT_LE(arena.used_bytes(), need);
  // The lookup tables dominate: at least the 128K-entry piece table and the merge table.
  EXPECT_GT(arena.used_bytes(ArenaPurpose::Tokenizer), 128256u * 4 + 280000u * 16);
  ArenaAllocator small(memory.data(), need / 2);
  EXPECT_EQ(Tokenizer::create(table, small).error(), Error::ArenaExhausted);
}

TEST_F(Llama2, GgmlVocabTestVectors) { expect_ground_truth(*tok_, ground_truth("ggml-vocab-llama-spm.gguf"), 46); }

TEST_F(Llama2, SentencePieceSamples) { expect_ground_truth(*tok_, ground_truth("llama2-sample.jsonl"), 327); }

TEST_F(Llama2, ImportedMetadata) {
  Tokenizer& t = tok_->tokenizer();
  EXPECT_EQ(t.kind(), TokenizerKind::SentencePieceBpe);
  EXPECT_EQ(t.vocab_size(), 32000);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_EQ(t.unk_id(), 0);
  EXPECT_TRUE(tok_->table()->add_dummy_prefix());
  EXPECT_TRUE(tok_->table()->byte_fallback());
  EXPECT_FALSE(tok_->table()->remove_extra_whitespaces());
}

TEST_F(Llama2, ByteFallbackPiecesDecodeOnlyWhenComplete) {
  // U+1F999 is not in the vocabulary: four <0xXX> byte pieces.
  const std::string llama = "\xF0\x9F\xA6\x99";
  auto ids = tok_->encode(llama);
  ASSERT_TRUE(ids.ok());
  Tokenizer& t = tok_->tokenizer();
  std::vector<int32_t> expected{t.find_piece("\xE2\x96\x81", 3)};
  for (const char* b : {"<0xF0>", "<0x9F>", "<0xA6>", "<0x99>"}) expected.push_back(t.find_piece(b, 6));
  EXPECT_EQ(*ids, expected);
  TokenDecoder decoder(t);
  char buf[64];
  std::vector<size_t> sizes;
  for (int32_t id : *ids) {
    auto n = decoder.push(id, buf, sizeof buf);
    ASSERT_TRUE(n.ok());
    sizes.push_back(*n);
  }
  // "▁" is the stripped dummy prefix; the character comes out with its last byte.
  EXPECT_EQ(sizes, (std::vector<size_t>{0, 0, 0, 0, 4}));
  EXPECT_EQ(std::string(buf, 4), llama);
}

TEST_F(Llama2, ControlTextIsParsedOnlyWhenAsked) {
  auto parsed = tok_->encode("<s>Hi</s>", false, true);
  ASSERT_TRUE(parsed.ok());
  ASSERT_GE(parsed->size(), 3u);
  EXPECT_EQ(parsed->front(), 1);
  EXPECT_EQ(parsed->back(), 2);
  auto plain = tok_->encode("<s>Hi</s>", false, false);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(std::count(plain->begin(), plain->end(), 1), 0);
}

TEST(TinyAusten, ReferenceInputIds) {
  TERN_REQUIRE_FILE(testing::tiny_austen_reference_logits());
  auto tok = load(testing::tiny_austen_packed_dir());  // the directory: tokenizer.json + tokenizer_config.json
  ASSERT_NE(tok, nullptr);
  Tokenizer& t = tok->tokenizer();
  EXPECT_EQ(t.vocab_size(), 2048);
  EXPECT_EQ(t.bos_id(), 2045);
  EXPECT_EQ(t.eos_id(), 2046);
  EXPECT_EQ(t.eot_id(), 2047);
  EXPECT_TRUE(t.add_bos_default());
  std::ifstream in(testing::tiny_austen_reference_logits());
  auto j = nlohmann::json::parse(in);
  size_t n = 0;
  for (const auto& c : j["cases"]) {
    const std::string text = c["text"].get<std::string>();
    auto ids = tok->encode(text, /*add_bos=*/true);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>()) << text;
    auto back = tok->decode(*ids);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, text);
    ++n;
  }
  EXPECT_EQ(n, 3u);
}

TEST(TokenizerImport, RejectsWhatItCannotRun) {
  testing::TempFile bad(".json");
  const std::string not_json = "{ \"model\": ";
  bad.write(not_json.data(), not_json.size());
  EXPECT_EQ(convert::import_tokenizer(bad.path()).error(), Error::InvalidArgument);
  testing::TempFile wordpiece(".json");
  const std::string wp = R"({"model": {"type": "WordPiece", "vocab": {}}})";
  wordpiece.write(wp.data(), wp.size());
  EXPECT_EQ(convert::import_tokenizer(wordpiece.path()).error(), Error::NotSupported);
  EXPECT_EQ(convert::import_tokenizer("/nonexistent/tokenizer.model").error(), Error::FileNotFound);
}

}  // namespace
}  // namespace tern
