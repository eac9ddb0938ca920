// The runtime's own SentencePiece encoder and decoder against libsentencepiece on
// thousands of generated strings: for models spm_train learned from the repository's text
// (BPE with byte fallback, unigram with <unk>, unigram with byte fallback; the
// tokenizer_spm_train fixture trains them), and for the LLaMA-2 model and bitllama2c's
// 512-piece model (third-party, from ../shared).
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "converter/tokenizer/tokenizer_host.h"
#include "runtime/text/tokenizer.h"
#include "runtime/text/unicode.h"
#include "tests/support/test_util.h"

namespace tern {
namespace {

using convert::HostTokenizer;
using testing::shared_path;

std::string utf8(uint32_t cp) {
  uint8_t b[4];
  return std::string(reinterpret_cast<char*>(b), unicode::encode_utf8(cp, b));
}

// Random mixes of ASCII words, accents, CJK, emoji, digits, punctuation, whitespace runs.
class TextGenerator {
 public:
  explicit TextGenerator(uint32_t seed, bool invalid_bytes = false) : rng_(seed), invalid_(invalid_bytes) {}

  std::string next() {
    std::string s;
    const int parts = pick(1, 12);
    for (int i = 0; i < parts; ++i) {
      switch (pick(0, invalid_ ? 10 : 8)) {
        case 0:
        case 1: {
          static const char* words[] = {"the", "Hello", "world", "llama", "once", "upon", "a",    "time",
                                        "I'm", "don't", "Lily",  "said",  "HTTP", "x",    "über", "naïve"};
          s += words[pick(0, 15)];
          break;
        }
        case 2:
          for (int k = pick(1, 6); k > 0; --k) s += static_cast<char>(pick('a', 'z'));
          break;
        case 3: s += std::string(pick(1, 5), ' '); break;
        case 4: {
          static const char* ws[] = {"\n", "\t", "\r\n", "\n\n", " \n ", "\xC2\xA0", "\xE3\x80\x80"};
          s += ws[pick(0, 6)];
          break;
        }
        case 5: {
          static const uint32_t accents[] = {0xE9,  0xE8,  0xFC,  0xF1,  0xE7,  0xC5, 0x101,
                                             0x3B1, 0x436, 0x5D0, 0x627, 0x915, 0x301};
          for (int k = pick(1, 4); k > 0; --k) s += utf8(accents[pick(0, 12)]);
          break;
        }
        case 6:
          for (int k = pick(1, 4); k > 0; --k) s += utf8(pick(0, 1) ? pick(0x4E00, 0x9FFF) : pick(0xAC00, 0xD7A3));
          break;
        case 7:
          for (int k = pick(1, 3); k > 0; --k) s += utf8(pick(0, 1) ? pick(0x1F600, 0x1F64F) : pick(0x1F900, 0x1F9FF));
          break;
        case 8: {
          static const char* punct[] = {".",   ",", "!",    "?", "'",   "\"", "(",           ")",
                                        "123", "4", "3.14", "$", "...", "--", "\xE2\x96\x81"};
          s += punct[pick(0, 14)];
          break;
        }
        case 9: s += std::string(1, '\0'); break;
        default: {
          static const char* bad[] = {"\xFF", "\x80", "\xC3", "\xE2\x96", "\xF0\x9F\x98", "\xED\xA0\x80", "\xC0\xAF"};
          s += bad[pick(0, 6)];
          break;
        }
      }
    }
    return s;
  }

 private:
  uint32_t pick(uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng_); }
  std::mt19937 rng_;
  bool invalid_;
};

struct SpmModel {
  const char* name;
  const char* shared;   // under ../shared (third-party), or
  const char* trained;  // trained by the tokenizer_spm_train fixture
};

class SpmReference : public ::testing::TestWithParam<SpmModel> {
 protected:
  void SetUp() override {
    std::string path;
    if (GetParam().shared != nullptr) {
      TERN_REQUIRE_SHARED(GetParam().shared);
      path = shared_path(GetParam().shared);
    } else {
      path = std::string(TERN_SPM_MODEL_DIR) + "/" + GetParam().trained + ".model";
      TERN_REQUIRE_FILE(path);
    }
    ASSERT_TRUE(reference_.Load(path).ok());
    auto t = HostTokenizer::load(path);
    ASSERT_TRUE(t.ok()) << last_error_message();
    tok_ = std::move(t).value();
  }
  size_t iterations() const { return std::getenv("TERN_SLOW_EMULATION") ? 300 : 3000; }

  void expect_same(const std::string& text, size_t* failures) {
    std::vector<int> want;
    const auto status = reference_.Encode(text, &want);
    ASSERT_TRUE(status.ok()) << status.ToString() << " for " << ::testing::PrintToString(text);
    auto got = tok_->encode(text);
    ASSERT_TRUE(got.ok()) << last_error_message();
    if (std::vector<int>(got->begin(), got->end()) != want) {
      if (++*failures <= 5) ADD_FAILURE() << "ids differ for " << ::testing::PrintToString(text);
      return;
    }
    std::string want_text;
    ASSERT_TRUE(reference_.Decode(want, &want_text).ok());
    auto back = tok_->decode(*got);
    ASSERT_TRUE(back.ok());
    if (*back != want_text && ++*failures <= 5) {
      ADD_FAILURE() << "decode differs for " << ::testing::PrintToString(text) << ": "
                    << ::testing::PrintToString(*back) << " vs " << ::testing::PrintToString(want_text);
    }
  }

  sentencepiece::SentencePieceProcessor reference_;
  std::unique_ptr<HostTokenizer> tok_;
};

TEST_P(SpmReference, GeneratedTextMatchesLibsentencepiece) {
  TextGenerator gen(1234);
  size_t failures = 0;
  for (size_t i = 0; i < iterations(); ++i) expect_same(gen.next(), &failures);
  EXPECT_EQ(failures, 0u);
}

// Real prose: every line of the repository's Austen and SOTU slices, and the same text in
// chunks of a few lines (long inputs with many words, newlines and runs of spaces).
TEST_P(SpmReference, ProseLinesMatchLibsentencepiece) {
  size_t failures = 0, texts = 0;
  for (const std::string& path : {testing::austen_text(), testing::sotu_held_out_text()}) {
    TERN_REQUIRE_FILE(path);
    const std::string all = testing::read_file_text(path);
    std::string chunk;
    size_t lines = 0;
    for (size_t begin = 0; begin < all.size();) {
      size_t end = all.find('\n', begin);
      end = end == std::string::npos ? all.size() : end + 1;
      const std::string line = all.substr(begin, end - begin);
      expect_same(line, &failures);
      chunk += line;
      if (++lines % 7 == 0) {
        expect_same(chunk, &failures);
        chunk.clear();
        ++texts;
      }
      ++texts;
      begin = end;
    }
  }
  EXPECT_GT(texts, 1000u);
  EXPECT_EQ(failures, 0u);
}

TEST_P(SpmReference, InvalidUtf8AndNulMatchLibsentencepiece) {
  TextGenerator gen(99, /*invalid_bytes=*/true);
  size_t failures = 0;
  for (size_t i = 0; i < iterations(); ++i) expect_same(gen.next(), &failures);
  for (const char* edge : {"", " ", "  ", "\n", "\xFF", "a\xFF b"}) expect_same(edge, &failures);
  expect_same(std::string("\0", 1), &failures);
  expect_same(std::string(" \0 \0", 4), &failures);
  EXPECT_EQ(failures, 0u);
}

TEST_P(SpmReference, RandomIdSequencesDecodeLikeLibsentencepiece) {
  std::mt19937 rng(7);
  const int vocab = reference_.GetPieceSize();
  size_t failures = 0;
  for (size_t i = 0; i < iterations(); ++i) {
    std::vector<int> ids(std::uniform_int_distribution<int>(1, 8)(rng));
    for (int& id : ids) id = std::uniform_int_distribution<int>(0, vocab - 1)(rng);
    std::string want;
    ASSERT_TRUE(reference_.Decode(ids, &want).ok());
    auto got = tok_->decode(std::vector<int32_t>(ids.begin(), ids.end()));
    ASSERT_TRUE(got.ok());
    if (*got != want && ++failures <= 5) {
      ADD_FAILURE() << ::testing::PrintToString(ids) << ": " << ::testing::PrintToString(*got) << " vs "
                    << ::testing::PrintToString(want);
    }
  }
  EXPECT_EQ(failures, 0u);
}

TEST_P(SpmReference, LongRunWithoutSpacesMatchesLibsentencepiece) {
  // 1 MB (64 KB under emulation) of text with its spaces removed: one huge word.
  std::string text;
  TextGenerator gen(5);
  const size_t size = std::getenv("TERN_SLOW_EMULATION") ? (64 << 10) : (1 << 20);
  while (text.size() < size) {
    for (char c : gen.next()) {
      if (c != ' ') text += c;
    }
  }
  std::vector<int> want;
  ASSERT_TRUE(reference_.Encode(text, &want).ok());
  Tokenizer& t = tok_->tokenizer();
  std::vector<int32_t> out(text.size() + 1);
  // The arena scratch is sized for ordinary words: a clear error, not a wrong answer.
  EXPECT_EQ(t.encode(text.data(), text.size(), false, false, out.data(), out.size()).error(), Error::BudgetTooSmall);
  auto got = tok_->encode(text);  // with a scratch of encode_scratch_bytes()
  ASSERT_TRUE(got.ok()) << last_error_message();
  EXPECT_TRUE(std::vector<int>(got->begin(), got->end()) == want);
}

// Models trained here with user-defined symbols, with and without the normalizer's
// extra-whitespace removal and byte fallback, compared on text full of those symbols.
TEST(SpmTrainedReference, UserDefinedSymbolsAndNormalizerOptions) {
  testing::TempFile corpus(".txt");
  {
    // Mostly English, so characters from the test strings outside it are unknown.
    std::ofstream out(corpus.path());
    std::mt19937 rng(11);
    static const char* words[] = {"the",   "a",    "little", "girl", "named", "Lily",  "once", "upon", "time", "über",
                                  "naïve", "said", "<ud>",   "foo",  "x-y",   "don't", "1984", "!",    ",",    "  "};
    for (int line = 0; line < 3000; ++line) {
      for (int k = 0; k < 12; ++k) out << words[std::uniform_int_distribution<int>(0, 19)(rng)] << ' ';
      out << '\n';
    }
  }
  struct Variant {
    const char* flags;
    const char* name;
  } variants[] = {
      {"--model_type=bpe --remove_extra_whitespaces=false --byte_fallback=true", "identity-like"},
      {"--model_type=bpe --remove_extra_whitespaces=true --byte_fallback=false", "remove-extra, no byte fallback"},
      // Unigram scores user-defined pieces in its lattice (L * max_score - 0.1) instead of freezing them.
      {"--model_type=unigram --remove_extra_whitespaces=false --byte_fallback=true", "unigram, byte fallback"},
      {"--model_type=unigram --remove_extra_whitespaces=true --byte_fallback=false", "unigram, remove-extra"},
  };
  for (const auto& v : variants) {
    SCOPED_TRACE(v.name);
    testing::TempFile model_prefix;
    const std::string args = "--input=" + corpus.path() + " --model_prefix=" + model_prefix.path() +
                             " --vocab_size=400 --character_coverage=1.0 --hard_vocab_limit=false"
                             " --user_defined_symbols=<ud>,foo,x-y --normalization_rule_name=identity"
                             " --minloglevel=2 --num_threads=1 " +
                             v.flags;
    const auto trained = sentencepiece::SentencePieceTrainer::Train(args);
    ASSERT_TRUE(trained.ok()) << trained.ToString() << "\n" << args;
    const std::string model = model_prefix.path() + ".model";
    sentencepiece::SentencePieceProcessor reference;
    ASSERT_TRUE(reference.Load(model).ok());
    auto host = HostTokenizer::load(model);
    std::remove(model.c_str());
    std::remove((model_prefix.path() + ".vocab").c_str());
    ASSERT_TRUE(host.ok()) << last_error_message();
    // The symbols really are user-defined pieces of their own.
    const int ud = reference.PieceToId("<ud>");
    ASSERT_GT(ud, reference.unk_id());
    auto alone = (*host)->encode("<ud>");
    ASSERT_TRUE(alone.ok());
    EXPECT_EQ(std::count(alone->begin(), alone->end(), ud), 1);
    TextGenerator gen(12);
    std::mt19937 rng(13);
    static const char* inserts[] = {"<ud>", "foo", "x-y", " <ud> ", "<ud><ud>", "  foo  ", "<u", "fo"};
    size_t failures = 0;
    const size_t iterations = std::getenv("TERN_SLOW_EMULATION") ? 200 : 2000;
    for (size_t i = 0; i < iterations; ++i) {
      std::string text;
      for (int k = std::uniform_int_distribution<int>(1, 4)(rng); k > 0; --k) {
        text += gen.next();
        text += inserts[std::uniform_int_distribution<int>(0, 7)(rng)];
      }
      std::vector<int> want;
      ASSERT_TRUE(reference.Encode(text, &want).ok());
      auto got = (*host)->encode(text);
      ASSERT_TRUE(got.ok()) << last_error_message();
      if (std::vector<int>(got->begin(), got->end()) != want) {
        if (++failures <= 5) ADD_FAILURE() << "ids differ for " << ::testing::PrintToString(text);
        continue;
      }
      std::string want_text;
      ASSERT_TRUE(reference.Decode(want, &want_text).ok());
      auto back = (*host)->decode(*got);
      ASSERT_TRUE(back.ok());
      if (*back != want_text && ++failures <= 5) {
        ADD_FAILURE() << "decode differs for " << ::testing::PrintToString(text) << ": "
                      << ::testing::PrintToString(*back) << " vs " << ::testing::PrintToString(want_text);
      }
    }
    EXPECT_EQ(failures, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SpmReference,
                         ::testing::Values(SpmModel{"TrainedBpeBytes", nullptr, "bpe-bytes"},
                                           SpmModel{"TrainedUnigram", nullptr, "unigram"},
                                           SpmModel{"TrainedUnigramBytes", nullptr, "unigram-bytes"},
                                           SpmModel{"Llama2", "tokenizers/llama2/tokenizer.model", nullptr},
                                           SpmModel{"Bitllama2c", "models/bitllama2c-3M/tokenizer.model", nullptr}),
                         [](const ::testing::TestParamInfo<SpmModel>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tern
