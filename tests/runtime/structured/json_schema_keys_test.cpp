// A key twice in one object of a schema: JSON readers differ on which one counts (Python's
// json and most validators keep the last, the converter's reader finds the first), so the
// grammar could follow the other one. Refused by name, wherever in the document it is.
#include <gtest/gtest.h>

#include <string>

#include "platform/error.h"
#include "runtime/structured/json_schema.h"
#include "tests/support/schema_convert.h"

namespace tern {
namespace {

TEST(JsonSchemaKeys, ATwiceWrittenKeyIsRefused) {
  for (const char* schema : {
           // Python's validator reads {"a": integer}; the first "a" would allow "x".
           R"({"type": "object", "properties": {"a": {"type": "string"}, "a": {"type": "integer"}}})",
           R"({"type": "string", "type": "integer"})", R"({"const": {"k": 1, "k": 2}})",
           R"({"enum": [1, {"x": [{"k": 1, "k": 1}]}]})",
           R"({"$defs": {"d": {"const": 1}, "d": {"const": 2}}, "$ref": "#/$defs/d"})",
           R"({"properties": {"a": {}, "\u0061": {}}})",  // the same name once unescaped
       }) {
    std::string message;
    EXPECT_EQ(testing::convert_schema(schema, &message), Error::UnsupportedSchema) << schema << "\n" << message;
    EXPECT_NE(message.find("twice"), std::string::npos) << message;
  }
  // Distinct keys, and the same key in different objects, are fine.
  std::string grammar;
  EXPECT_EQ(testing::convert_schema(R"({"type": "object", "properties": {"a": {"properties": {"a": {}}},
                                       "ab": {}, "b": {"const": {"a": 1, "b": 2}}}})",
                                    &grammar),
            Error::Ok)
      << grammar;
  EXPECT_EQ(testing::convert_schema(R"({"properties": {"\u00e9": {}, "e\u0301": {}}})", &grammar), Error::Ok)
      << grammar;  // different code points (JSON compares names without normalizing)
}

}  // namespace
}  // namespace tern
