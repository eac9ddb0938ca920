// "$ref" fragments as RFC 6901 section 6 reads them: percent-decoded, then a JSON pointer.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "platform/error.h"
#include "runtime/structured/json_schema.h"
#include "tests/support/schema_convert.h"

namespace tern {
namespace {

TEST(JsonSchemaRef, FragmentsArePercentDecoded) {
  // %25 is '%', %22 is '"': the names "a%b" and "q\"t", not their encoded spellings.
  std::string grammar;
  ASSERT_EQ(testing::convert_schema(R"({"$defs": {"a%b": {"const": "right"}, "a%25b": {"const": "wrong"}},
                         "$ref": "#/$defs/a%25b"})",
                                    &grammar),
            Error::Ok)
      << grammar;
  EXPECT_NE(grammar.find("right"), std::string::npos) << grammar;
  EXPECT_EQ(grammar.find("wrong"), std::string::npos) << grammar;
  ASSERT_EQ(testing::convert_schema(R"({"$defs": {"q\"t": {"const": 7}}, "$ref": "#/$defs/q%22t"})", &grammar),
            Error::Ok)
      << grammar;
  EXPECT_NE(grammar.find("\"7\""), std::string::npos) << grammar;
  // %2F is a '/', so a separator after decoding; ~1 is the escape for a '/' in a name.
  ASSERT_EQ(testing::convert_schema(
                R"({"$defs": {"x": {"y": {"const": 1}}, "x/y": {"const": 2}}, "$ref": "#/$defs/x%2Fy"})", &grammar),
            Error::Ok);
  EXPECT_NE(grammar.find("\"1\""), std::string::npos) << grammar;
  ASSERT_EQ(testing::convert_schema(
                R"({"$defs": {"x": {"y": {"const": 1}}, "x/y": {"const": 2}}, "$ref": "#/$defs/x~1y"})", &grammar),
            Error::Ok);
  EXPECT_NE(grammar.find("\"2\""), std::string::npos) << grammar;
}

TEST(JsonSchemaRef, BadEscapesAreRefused) {
  std::string message;
  for (const char* schema :
       {R"({"$defs": {"a": true}, "$ref": "#/$defs/a%2"})", R"({"$defs": {"a": true}, "$ref": "#/$defs/a%zz"})",
        R"({"$defs": {"a": true}, "$ref": "#/$defs/a%00"})"}) {
    EXPECT_EQ(testing::convert_schema(schema, &message), Error::InvalidArgument) << schema;
    EXPECT_NE(message.find("percent-escape"), std::string::npos) << message;
  }
}

// An embedded resource ("$id" below the root) is where its own "#/..." pointers resolve;
// resolving them against the document would pick another schema, so it is refused by name.
TEST(JsonSchemaRef, IdBelowTheRootIsRefused) {
  std::string message;
  EXPECT_EQ(testing::convert_schema(R"({"$defs": {"x": {"const": "root's"}},
                        "properties": {"p": {"$id": "http://example.com/inner",
                                             "$defs": {"x": {"const": "inner's"}}, "$ref": "#/$defs/x"}}})",
                                    &message),
            Error::UnsupportedSchema);
  EXPECT_NE(message.find("'$id' below the root"), std::string::npos) << message;
  // At the root it names the document, which "#/..." pointers resolve against anyway.
  std::string grammar;
  EXPECT_EQ(testing::convert_schema(
                R"({"$id": "http://example.com/s", "$defs": {"x": {"const": 1}}, "$ref": "#/$defs/x"})", &grammar),
            Error::Ok)
      << grammar;
}

}  // namespace
}  // namespace tern
