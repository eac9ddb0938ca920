// A JSON reader for the device library: validates text once (RFC 8259, nesting at most
// kMaxJsonDepth), then walks it in place. Values are spans of the caller's text; objects and
// arrays are iterated by scanning, so nothing is allocated and nothing throws. Used where
// the runtime reads JSON it was handed (JSON Schemas for constrained generation).
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/error.h"

namespace tern::json {

inline constexpr int kMaxJsonDepth = 128;

enum class Kind : uint8_t { Null, Bool, Number, String, Array, Object };
const char* to_string(Kind kind);

// A value's text: [begin, end) (a string's span includes its quotes).
struct Value {
  Kind kind = Kind::Null;
  const char* begin = nullptr;
  const char* end = nullptr;
  size_t size() const { return static_cast<size_t>(end - begin); }
};

// Checks that `text` is exactly one JSON value (surrounding white space allowed) and returns
// it. InvalidArgument naming the line and column of the first problem (and the depth limit).
Result<Value> parse(const char* text, size_t size);

// Members of a validated object, in text order.
class Members {
 public:
  explicit Members(const Value& object);
  // The next member; false after the last.
  bool next(Value* key, Value* value);

 private:
  const char* p_;
  const char* end_;
};

// Items of a validated array, in order.
class Items {
 public:
  explicit Items(const Value& array);
  bool next(Value* item);

 private:
  const char* p_;
  const char* end_;
};

// The member of `object` whose key equals `key` (compared after unescaping); the first one
// when the key repeats. False when absent or `object` is not an object.
bool find(const Value& object, const char* key, Value* out);
// A string value's unescaped bytes equal `text`.
bool string_equals(const Value& string, const char* text, size_t size);
bool string_equals(const Value& string, const char* text);
// Writes a string value's unescaped bytes (\uXXXX as UTF-8, surrogate pairs joined; a lone
// surrogate becomes U+FFFD) into out, at most `capacity` of them; returns how many the whole
// string has.
size_t unescape(const Value& string, char* out, size_t capacity);
// unescape into a C string in out[0, N), cut to fit (messages, names to compare); returns the
// whole string's length.
template <size_t N>
size_t unescape_cstr(const Value& string, char (&out)[N]) {
  const size_t n = unescape(string, out, N - 1);
  out[n < N - 1 ? n : N - 1] = '\0';
  return n;
}
size_t count_items(const Value& array);
// The value the JSON pointer `pointer` (RFC 6901: "" or "/a/0/~1b", ~0 for '~' and ~1 for '/'
// in a name; segments up to 255 bytes) refers to in `root`. False when there is none.
bool at_pointer(const Value& root, const char* pointer, Value* out);
// A URI fragment's %XX escapes decoded into out (at least as large as `in`), as RFC 6901
// (section 6) has a fragment read before it is a JSON pointer. False on a bad escape and on
// %00, which would cut the pointer short.
bool percent_decode(const char* in, char* out);

// A number's value, exactly when it is an integer in int64's range (1.0 and 1e2 count as
// integers; 1.5 does not). False otherwise.
bool as_int64(const Value& number, int64_t* out);
// A number's value as a double (nearest, within a few ulps; enough to compare bounds).
double as_double(const Value& number);
// The greatest integer at most the number's exact decimal value (floor(-1.5) = -2), and
// whether the value is whole, read from its digits (1e-400 is above 0, 2.99999999999999999999
// below 3). False when the floor is beyond 18 digits.
bool floor_exact(const Value& number, int64_t* floor, bool* whole);
// Whether the number's exact value is whole (2.0, 1.50e1 and 1e400 are; 1e-400 is not). A
// nonzero digit past the 40th significant one counts as a fraction.
bool is_whole(const Value& number);

}  // namespace tern::json
