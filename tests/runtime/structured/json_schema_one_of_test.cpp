// "oneOf" is exact or refused: kept where no value can match two branches (their kinds, by
// JSON Schema's meaning, are disjoint), refused by name where one could.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "platform/error.h"
#include "runtime/structured/json_schema.h"
#include "tests/support/schema_convert.h"

namespace tern {
namespace {

TEST(JsonSchemaOneOf, DisjointKindsAreKept) {
  for (const char* schema : {
           R"({"oneOf": [{"type": "boolean"}, {"type": "null"}]})",
           R"({"oneOf": [{"type": "integer"}, {"type": "string"}, {"type": "array", "items": {"type": "null"}}]})",
           R"({"oneOf": [{"const": 1.5}, {"type": "integer"}]})",  // 1.5 is not whole
           R"({"oneOf": [{"enum": ["a", "b"]}, {"type": ["null", "object"]}]})",
           R"({"$defs": {"s": {"type": "string"}}, "oneOf": [{"$ref": "#/$defs/s"}, {"type": "number"}]})",
           R"({"oneOf": [{"anyOf": [{"type": "string"}, {"type": "null"}]}, {"type": "boolean"}]})",
       }) {
    std::string grammar;
    EXPECT_EQ(testing::convert_schema(schema, &grammar), Error::Ok) << schema << "\n" << grammar;
  }
}

TEST(JsonSchemaOneOf, BranchesThatMayOverlapAreRefused) {
  for (const char* schema : {
           R"({"oneOf": [{"type": "integer"}, {"minimum": 2}]})",  // 3 matches both
           R"({"oneOf": [true, true, true]})",                     // every value matches all three
           R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})",
           R"({"oneOf": [{"const": 2.0}, {"type": "integer"}]})",   // 2.0 is the integer 2
           R"({"oneOf": [{"type": "string"}, {"maxLength": 3}]})",  // maxLength holds for any non-string
           R"({"$defs": {"n": {"type": "number"}}, "oneOf": [{"$ref": "#/$defs/n"}, {"enum": [1, "x"]}]})",
           R"({"oneOf": [{"type": "object", "properties": {"k": {"const": 1}}}, {"type": "object"}]})",
       }) {
    std::string message;
    EXPECT_EQ(testing::convert_schema(schema, &message), Error::UnsupportedSchema) << schema;
    EXPECT_NE(message.find("'oneOf'"), std::string::npos) << message;
  }
  // anyOf has no such rule: overlapping branches are what it means.
  std::string grammar;
  EXPECT_EQ(testing::convert_schema(R"({"anyOf": [{"type": "integer"}, {"minimum": 2}]})", &grammar), Error::Ok)
      << grammar;
}

}  // namespace
}  // namespace tern
