// JSON values in their canonical spelling, the one a constant-matching grammar allows:
// strings (and names) in UTF-8 with only the escapes JSON requires (\" \\ \b \f \n \r \t,
// \u00xx for other control characters), as JSON.stringify and Python's
// json.dumps(ensure_ascii=False) write them; numbers, true, false and null as written.
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

}  // namespace tern
