// Large counts (maxLength, minItems / maxItems up to 65535) are counted in the grammar's parse
// state: instances at and around the bounds, checked against the counts themselves.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "runtime/structured/grammar.h"
#include "tests/support/byte_vocab.h"
#include "tests/support/schema_convert.h"

namespace tern {
namespace {

class JsonSchemaCounts : public ::testing::Test {
 protected:
  static constexpr size_t kRegion = size_t{8} << 20;
  void SetUp() override {
    ASSERT_EQ(bytes_.build(), Error::Ok);
    region_.reset(new uint8_t[kRegion]);
  }
  void compile(const std::string& schema) {
    std::string text;
    ASSERT_EQ(testing::convert_schema(schema, &text), Error::Ok) << text;
    ASSERT_EQ(g_.compile(text.data(), text.size(), bytes_.vocab(), region_.get(), kRegion), Error::Ok)
        << last_error_message();
  }
  bool accepts(const std::string& instance) {
    g_.restart();
    auto r = g_.accept_bytes(reinterpret_cast<const uint8_t*>(instance.data()), instance.size());
    EXPECT_TRUE(r.ok()) << last_error_message();
    return r.ok() && *r && g_.accepting();
  }
  testing::ByteVocab bytes_;
  std::unique_ptr<uint8_t[]> region_;
  Grammar g_;
};

std::string items(size_t n) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) s += i == 0 ? "7" : ",7";
  return s + "]";
}

TEST_F(JsonSchemaCounts, ItemsUpTo65535) {
  compile(R"({"type": "array", "items": {"type": "integer"}, "minItems": 3000, "maxItems": 65535})");
  for (size_t n : {0, 1, 2999, 3000, 3001, 40000, 65534, 65535, 65536, 70000}) {
    EXPECT_EQ(accepts(items(n)), n >= 3000 && n <= 65535) << n << " items";
  }
}

TEST_F(JsonSchemaCounts, StringLengthsInCodePoints) {
  compile(R"({"type": "string", "minLength": 17, "maxLength": 65535})");
  for (size_t n : {0, 16, 17, 18, 1000, 65534, 65535, 65536}) {
    EXPECT_EQ(accepts("\"" + std::string(n, 'a') + "\""), n >= 17 && n <= 65535) << n << " characters";
  }
  // Two-byte characters and escapes are one character each.
  std::string e;
  for (int i = 0; i < 65535; ++i) e += i % 2 ? "\xc3\xa9" : "\\n";
  EXPECT_TRUE(accepts("\"" + e + "\""));
  EXPECT_FALSE(accepts("\"" + e + "x\""));
}

}  // namespace
}  // namespace tern
