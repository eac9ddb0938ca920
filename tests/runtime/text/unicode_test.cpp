// The generated class tables against independent sources: utf8proc's general categories
// for \p{L} / \p{N}, and PropList.txt's White_Space for \s. The UTF-8 decoder against
// hand-computed cases.
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/text/unicode.h"

namespace tern {
namespace {

TEST(UnicodeClasses, LettersAndNumbersAgreeWithUtf8proc) {
  size_t compared = 0, mismatches = 0;
  for (uint32_t cp = 0; cp < 0x110000; ++cp) {
    const utf8proc_category_t cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
    const uint8_t flags = unicode::classify(cp);
    // Unassigned in utf8proc: nothing to compare against.
    if (cat == UTF8PROC_CATEGORY_CN) continue;
    const bool letter = cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
    const bool number = cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO;
    ++compared;
    if (letter != bool(flags & unicode::kLetter) || number != bool(flags & unicode::kNumber)) {
      if (++mismatches < 10) ADD_FAILURE() << "U+" << std::hex << cp << " category " << std::dec << cat;
    }
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_GT(compared, 200000u);
}

TEST(UnicodeClasses, WhitespaceIsPropListWhiteSpace) {
  const char* path = "/usr/share/unicode/PropList.txt";
  std::ifstream in(path);
  if (!in) GTEST_SKIP() << path << " not installed";
  std::vector<bool> white(0x110000, false);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("; White_Space") == std::string::npos) continue;
    unsigned first = 0, last = 0;
    if (std::sscanf(line.c_str(), "%x..%x", &first, &last) != 2) {
      std::sscanf(line.c_str(), "%x", &first);
      last = first;
    }
    for (unsigned c = first; c <= last; ++c) white[c] = true;
  }
  size_t count = 0;
  for (uint32_t cp = 0; cp < 0x110000; ++cp) {
    EXPECT_EQ(white[cp], unicode::is_whitespace(cp)) << "U+" << std::hex << cp;
    count += white[cp];
  }
  EXPECT_EQ(count, 25u);  // White_Space has had 25 code points since Unicode 6.3
}

TEST(Utf8, DecodesValidSequences) {
  struct Case {
    std::string bytes;
    uint32_t cp;
    uint32_t length;
  } cases[] = {
      {"A", 0x41, 1},
      {std::string("\0", 1), 0, 1},
      {"\xC3\xA9", 0xE9, 2},
      {"\xE2\x96\x81", 0x2581, 3},
      {"\xEF\xBF\xBD", 0xFFFD, 3},
      {"\xF0\x9F\x98\x80", 0x1F600, 4},
      {"\xF4\x8F\xBF\xBF", 0x10FFFF, 4},
  };
  for (const auto& c : cases) {
    const auto d = unicode::decode_utf8(reinterpret_cast<const uint8_t*>(c.bytes.data()), c.bytes.size());
    EXPECT_TRUE(d.valid) << c.cp;
    EXPECT_EQ(d.cp, c.cp);
    EXPECT_EQ(d.length, c.length);
    uint8_t buf[4];
    ASSERT_EQ(unicode::encode_utf8(c.cp, buf), c.length);
    EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), c.length), c.bytes);
  }
}

TEST(Utf8, RejectsInvalidSequencesOneByteAtATime) {
  const std::string cases[] = {
      "\x80",              // lone continuation
      "\xC0\xAF",          // overlong '/'
      "\xC1\xBF",          // overlong
      "\xE0\x80\xAF",      // overlong 3-byte
      "\xED\xA0\x80",      // surrogate U+D800
      "\xF0\x80\x80\xAF",  // overlong 4-byte
      "\xF4\x90\x80\x80",  // U+110000
      "\xF5\x80\x80\x80",  // lead byte out of range
      "\xFF",
      "\xE2\x96",  // truncated
      "\xC3\x41",  // bad continuation
  };
  for (const auto& c : cases) {
    const auto d = unicode::decode_utf8(reinterpret_cast<const uint8_t*>(c.data()), c.size());
    EXPECT_FALSE(d.valid) << testing::PrintToString(c);
    EXPECT_EQ(d.cp, unicode::kReplacementChar);
    EXPECT_EQ(d.length, 1u);
  }
}

}  // namespace
}  // namespace tern
