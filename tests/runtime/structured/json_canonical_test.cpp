// What "type" admits beside "const" and "enum" (whole numbers count as integers in any
// spelling), and constants a grammar cannot spell: each against the value JSON defines.
#include "runtime/structured/json_canonical.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "platform/error.h"
#include "runtime/structured/json_schema.h"
#include "runtime/structured/json_schema_kinds.h"
#include "tests/support/schema_convert.h"

namespace tern {
namespace {

// Values point into their text: a literal, which outlives them.
json::Value parsed(const char* text) {
  auto v = json::parse(text, std::strlen(text));
  EXPECT_TRUE(v.ok()) << text;
  return v.ok() ? *v : json::Value{};
}

TEST(JsonType, IntegerMeansAWholeValueInAnySpelling) {
  struct Case {
    const char* number;
    bool whole;
  };
  const Case cases[] = {
      {"0", true},
      {"-0", true},
      {"7", true},
      {"2.0", true},
      {"-2.000", true},
      {"1e1", true},
      {"1.50e1", true},
      {"15E-1", false},
      {"1e-1", false},
      {"1.5", false},
      {"0.0e5", true},
      {"120e-1", true},
      {"125e-2", false},
      {"1e400", true},
      {"1e-400", false},
      {"0e-400", true},
      {"3.14e2", true},
      {"3.145e2", false},
      {"100000000000000000000.0", true},
  };
  const json::Value integer = parsed("\"integer\""), number = parsed("\"number\"");
  for (const Case& c : cases) {
    const json::Value v = parsed(c.number);
    EXPECT_EQ(json_type_admits(integer, v), c.whole) << c.number;
    EXPECT_TRUE(json_type_admits(number, v)) << c.number;
  }
}

TEST(JsonType, EachKindAndLists) {
  const json::Value types = parsed("[\"string\", \"null\"]");
  EXPECT_TRUE(json_type_admits(types, parsed("\"x\"")));
  EXPECT_TRUE(json_type_admits(types, parsed("null")));
  EXPECT_FALSE(json_type_admits(types, parsed("1")));
  EXPECT_FALSE(json_type_admits(types, parsed("[1]")));
  EXPECT_TRUE(json_type_admits(parsed("\"boolean\""), parsed("false")));
  EXPECT_TRUE(json_type_admits(parsed("\"object\""), parsed("{}")));
  EXPECT_FALSE(json_type_admits(parsed("\"array\""), parsed("{}")));
  EXPECT_TRUE(json_type_valid(types));
  EXPECT_FALSE(json_type_valid(parsed("[]")));
  EXPECT_FALSE(json_type_valid(parsed("\"integr\"")));
  EXPECT_FALSE(json_type_valid(parsed("[\"string\", 5]")));
}

TEST(JsonSchemaConstants, LoneSurrogatesAreRefusedByName) {
  // UTF-8 cannot spell a lone surrogate; writing U+FFFD instead would change the value asked for.
  for (const char* schema :
       {R"({"const": "\ud800"})", R"({"enum": ["a", "b\udc00"]})", R"({"const": "x\ud800\u0041"})",
        R"({"const": {"k\udfff": 1}})", R"({"type": "object", "properties": {"\ud834": {"type": "null"}}})"}) {
    std::string message;
    EXPECT_EQ(testing::convert_schema(schema, &message), Error::UnsupportedSchema) << schema << "\n" << message;
    EXPECT_NE(message.find("lone surrogate"), std::string::npos) << message;
  }
  // A pair is one character (U+1F600), spelled in UTF-8.
  std::string grammar;
  ASSERT_EQ(testing::convert_schema(R"({"const": "\ud83d\ude00"})", &grammar), Error::Ok) << grammar;
  EXPECT_NE(grammar.find("\xF0\x9F\x98\x80"), std::string::npos) << grammar;
}

TEST(JsonSchemaConstants, TypeBesideConstOrEnumFiltersOrRefuses) {
  std::string message;
  EXPECT_EQ(testing::convert_schema(R"({"const": 1, "type": "string"})", &message), Error::UnsupportedSchema);
  EXPECT_NE(message.find("'const' outside 'type'"), std::string::npos) << message;
  EXPECT_EQ(testing::convert_schema(R"({"enum": []})", &message), Error::UnsupportedSchema);
  EXPECT_NE(message.find("'enum' empty"), std::string::npos) << message;
  EXPECT_EQ(testing::convert_schema(R"({"enum": [1], "type": 3})", &message), Error::InvalidArgument) << message;
  std::string grammar;
  ASSERT_EQ(testing::convert_schema(R"({"enum": [1, "a", 2.5, null], "type": "integer"})", &grammar), Error::Ok)
      << grammar;
  EXPECT_NE(grammar.find("\"1\""), std::string::npos) << grammar;
  EXPECT_EQ(grammar.find("2.5"), std::string::npos) << grammar;
  EXPECT_EQ(grammar.find("\\\"a\\\""), std::string::npos) << grammar;
  EXPECT_EQ(grammar.find("null\""), std::string::npos) << grammar;
}

}  // namespace
}  // namespace tern
