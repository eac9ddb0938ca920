// JSON values in their canonical spelling, the one a constant-matching grammar allows:
// strings (and names) in UTF-8 with only the escapes JSON requires (\" \\ \b \f \n \r \t,
// \u00xx for other control characters), as JSON.stringify and Python's
// json.dumps(ensure_ascii=False) write them; numbers, true, false and null as written.
// And what JSON Schema's "type" admits of a value, for "const" and "enum" beside "type".
#pragma once

#include <cstddef>

#include "runtime/structured/json_reader.h"

namespace tern {

struct CanonicalJson {
  char buf[2048];
  size_t n = 0;
  bool put(const char* s, size_t k);
};

enum class CanonicalResult {
  Ok,
  TooLong,
  // "\ud800" without its pair: UTF-8 cannot spell it, and writing U+FFFD instead would change
  // the value the schema asks for.
  LoneSurrogate,
};

CanonicalResult canonical_json_string(const json::Value& s, CanonicalJson* c);
CanonicalResult canonical_json(const json::Value& v, CanonicalJson* c);

// Whether a JSON Schema type name ("integer": a number whose value is whole, 2.0 and 1e3
// included) admits the value. `type` is a name string or an array of them; false for
// anything else (the caller reports the malformed "type").
bool json_type_admits(const json::Value& type, const json::Value& v);
// Whether `type` is a type name or a non-empty array of type names.
bool json_type_valid(const json::Value& type);

}  // namespace tern
