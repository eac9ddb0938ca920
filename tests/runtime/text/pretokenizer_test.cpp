// The native LLaMA-3 pre-tokenizer against a second implementation: std::regex (a
// backtracking ECMAScript engine) running the same pattern over text whose characters are
// replaced by ASCII stand-ins for their Unicode class, with classes taken from utf8proc.
// libstdc++'s <regex> trips GCC 12's -Wmaybe-uninitialized under the sanitizers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "runtime/text/pretokenizer.h"
#include "runtime/text/unicode.h"

namespace tern {
namespace {

// The stand-in for one code point: ASCII letters, digits and the characters the pattern
// names keep themselves; other letters become 'a', numbers '0', spaces '\t', the rest '!'.
char stand_in(uint32_t cp) {
  if (cp < 0x80 && (std::isalnum(static_cast<int>(cp)) || cp == '\'' || cp == ' ' || cp == '\r' || cp == '\n')) {
    return static_cast<char>(cp);
  }
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  if (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) return 'a';
  if (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO) return '0';
  const bool space = cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP ||
                     (cp >= 0x09 && cp <= 0x0D) || cp == 0x85;
  return space ? '\t' : '!';
}

std::vector<size_t> regex_splits(const std::string& text) {
  static const std::regex pattern(
      "'s|'t|'re|'ve|'m|'ll|'d|[^\\r\\nA-Za-z0-9]?[A-Za-z]+|[0-9]{1,3}| ?[^\\sA-Za-z0-9]+[\\r\\n]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      std::regex::ECMAScript | std::regex::icase);
  std::string mapped;
  std::vector<size_t> offsets;  // byte offset of each mapped character, plus the end
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  for (size_t i = 0; i < text.size();) {
    utf8proc_int32_t cp;
    const auto n = utf8proc_iterate(s + i, static_cast<utf8proc_ssize_t>(text.size() - i), &cp);
    offsets.push_back(i);
    mapped += stand_in(static_cast<uint32_t>(cp));
    i += static_cast<size_t>(n);
  }
  offsets.push_back(text.size());
  std::vector<size_t> ends;
  for (size_t pos = 0; pos < mapped.size();) {
    std::smatch m;
    if (!std::regex_search(mapped.cbegin() + static_cast<long>(pos), mapped.cend(), m, pattern,
                           std::regex_constants::match_continuous) ||
        m.length(0) == 0) {
      ADD_FAILURE() << "regex did not match at " << pos;
      return ends;
    }
    pos += static_cast<size_t>(m.length(0));
    ends.push_back(offsets[pos]);
  }
  return ends;
}

std::vector<size_t> native_splits(const std::string& text) {
  std::vector<size_t> ends;
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  for (size_t pos = 0; pos < text.size();) {
    pos = llama3_pretoken_end(s, text.size(), pos);
    ends.push_back(pos);
  }
  return ends;
}

std::string utf8(uint32_t cp) {
  uint8_t b[4];
  return std::string(reinterpret_cast<char*>(b), unicode::encode_utf8(cp, b));
}

TEST(Llama3PreTokenizer, HandWrittenCases) {
  // Expected pieces worked out from the pattern by hand.
  struct Case {
    std::string text;
    std::vector<std::string> pieces;
  } cases[] = {
      {"Hello world", {"Hello", " world"}},
      {"I'm don'T we'LL", {"I", "'m", " don", "'T", " we", "'LL"}},
      {"12345 abc", {"123", "45", " abc"}},
      {"a  b", {"a", " ", " b"}},
      {"a \n\n b", {"a", " \n\n", " b"}},
      {"x   ", {"x", "   "}},
      {"!!! ??\n\nz", {"!!!", " ??\n\n", "z"}},
      {"$hello \tworld", {"$hello", " ", "\tworld"}},
      {"a 1", {"a", " ", "1"}},
  };
  for (const auto& c : cases) {
    std::vector<std::string> got;
    size_t prev = 0;
    for (size_t end : native_splits(c.text)) {
      got.push_back(c.text.substr(prev, end - prev));
      prev = end;
    }
    EXPECT_EQ(got, c.pieces) << ::testing::PrintToString(c.text);
  }
}

TEST(Llama3PreTokenizer, MatchesRegexEngineOnGeneratedText) {
  std::mt19937 rng(42);
  auto pick = [&](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng); };
  // Characters from every class the pattern distinguishes.
  const std::vector<std::string> palette = {"a",
                                            "Z",
                                            "s",
                                            "t",
                                            "r",
                                            "e",
                                            "v",
                                            "m",
                                            "l",
                                            "d",
                                            "S",
                                            "T",
                                            "L",
                                            "D",
                                            "'",
                                            "'",
                                            "'",
                                            "0",
                                            "7",
                                            "9",
                                            " ",
                                            " ",
                                            " ",
                                            "\t",
                                            "\r",
                                            "\n",
                                            "\x0B",
                                            "!",
                                            ".",
                                            ",",
                                            "-",
                                            "$",
                                            "\"",
                                            utf8(0xE9),
                                            utf8(0x3B1),
                                            utf8(0x4E2D),
                                            utf8(0x301) /* combining mark */,
                                            utf8(0x661) /* Arabic 1 */,
                                            utf8(0x216B) /* Roman XII, Nl */,
                                            utf8(0xBD) /* one half, No */,
                                            utf8(0xA0),
                                            utf8(0x3000),
                                            utf8(0x2028),
                                            utf8(0x85),
                                            utf8(0x1F600),
                                            utf8(0x2581),
                                            utf8(0xFFFD),
                                            std::string(1, '\0')};
  const size_t iterations = std::getenv("TERN_SLOW_EMULATION") ? 500 : 5000;
  size_t failures = 0;
  for (size_t i = 0; i < iterations; ++i) {
    std::string text;
    for (uint32_t n = pick(1, 24); n > 0; --n) text += palette[pick(0, static_cast<uint32_t>(palette.size() - 1))];
    const auto want = regex_splits(text);
    const auto got = native_splits(text);
    if (got != want && ++failures <= 5) {
      ADD_FAILURE() << ::testing::PrintToString(text) << ": native " << ::testing::PrintToString(got) << " regex "
                    << ::testing::PrintToString(want);
    }
  }
  EXPECT_EQ(failures, 0u);
}

}  // namespace
}  // namespace tern
