// A JSON Schema through the library's converter, for the structured-output tests: the
// grammar text, or on failure the error message.
#pragma once

#include <string>
#include <vector>

#include "platform/error.h"
#include "runtime/structured/json_schema.h"

namespace tern::testing {

inline Error convert_schema(const std::string& schema, std::string* text_or_message) {
  std::vector<char> out(1 << 20);
  size_t size = 0;
  const Error e = json_schema_to_grammar(schema.data(), schema.size(), out.data(), out.size(), &size);
  *text_or_message = e == Error::Ok ? std::string(out.data(), size) : last_error_message();
  return e;
}

}  // namespace tern::testing
