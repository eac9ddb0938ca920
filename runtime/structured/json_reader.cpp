#include "runtime/structured/json_reader.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "runtime/text/unicode.h"

namespace tern::json {

const char* to_string(Kind kind) {
  switch (kind) {
    case Kind::Null: return "null";
    case Kind::Bool: return "boolean";
    case Kind::Number: return "number";
    case Kind::String: return "string";
    case Kind::Array: return "array";
    case Kind::Object: return "object";
  }
  return "?";
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

const char* skip_space(const char* p, const char* end) {
  while (p < end && is_space(*p)) ++p;
  return p;
}

// The validator: one pass, an explicit stack of open containers.
class Validator {
 public:
  Validator(const char* text, size_t size) : begin_(text), end_(text + size) {}

  Result<Value> run() {
    const char* p = skip_space(begin_, end_);
    Value root;
    TERN_RETURN_IF_ERROR(value(p, &root));
    p = skip_space(root.end, end_);
    if (p != end_) return error(p, "text after the JSON value");
    return root;
  }

 private:
  Error error(const char* at, const char* what) const {
    uint32_t line = 1, column = 1;
    for (const char* q = begin_; q < at && q < end_; ++q) {
      if (*q == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return fail(Error::InvalidArgument, "JSON line %u column %u: %s", line, column, what);
  }

  Error string(const char*& p) {
    ++p;  // the opening quote
    while (p < end_) {
      const unsigned char c = static_cast<unsigned char>(*p);
      if (c == '"') {
        ++p;
        return Error::Ok;
      }
      if (c < 0x20) return error(p, "control character in a string (escape it)");
      if (c == '\\') {
        if (p + 1 >= end_) break;
        const char e = p[1];
        if (e == 'u') {
          if (end_ - p < 6 || hex_value(p[2]) < 0 || hex_value(p[3]) < 0 || hex_value(p[4]) < 0 ||
              hex_value(p[5]) < 0) {
            return error(p, "\\u needs four hex digits");
          }
          p += 6;
          continue;
        }
        if (std::strchr("\"\\/bfnrt", e) == nullptr || e == '\0') return error(p, "unknown escape in a string");
        p += 2;
        continue;
      }
      if (c < 0x80) {
        ++p;
        continue;
      }
      const unicode::Decoded d =
          unicode::decode_utf8(reinterpret_cast<const uint8_t*>(p), static_cast<size_t>(end_ - p));
      if (!d.valid) return error(p, "invalid UTF-8 in a string");
      p += d.length;
    }
    return error(p, "unterminated string");
  }

  Error number(const char*& p) {
    const char* start = p;
    if (p < end_ && *p == '-') ++p;
    if (p >= end_ || !is_digit(*p)) return error(start, "invalid number");
    if (*p == '0') {
      ++p;
    } else {
      while (p < end_ && is_digit(*p)) ++p;
    }
    if (p < end_ && *p == '.') {
      ++p;
      if (p >= end_ || !is_digit(*p)) return error(start, "invalid number (digits must follow the point)");
      while (p < end_ && is_digit(*p)) ++p;
    }
    if (p < end_ && (*p == 'e' || *p == 'E')) {
      ++p;
      if (p < end_ && (*p == '+' || *p == '-')) ++p;
      if (p >= end_ || !is_digit(*p)) return error(start, "invalid number (digits must follow the exponent)");
      while (p < end_ && is_digit(*p)) ++p;
    }
    return Error::Ok;
  }

  Error literal(const char*& p, const char* word) {
    const size_t n = std::strlen(word);
    if (static_cast<size_t>(end_ - p) < n || std::memcmp(p, word, n) != 0) return error(p, "unexpected character");
    p += n;
    return Error::Ok;
  }

  // One value at p (no leading space), containers included, without recursion.
  Error value(const char* p, Value* out) {
    Kind stack[kMaxJsonDepth];
    int depth = 0;
    out->begin = p;
    // After each scalar or closed container: expect ',' or the closer, or finish.
    for (;;) {
      if (p >= end_) return error(p, depth == 0 ? "no JSON value" : "unexpected end of the text");
      const char c = *p;
      Kind kind = Kind::Null;
      if (c == '{' || c == '[') {
        if (depth == kMaxJsonDepth) return error(p, "nested deeper than 128 levels");
        kind = c == '{' ? Kind::Object : Kind::Array;
        stack[depth++] = kind;
        if (depth == 1) out->kind = kind;
        p = skip_space(p + 1, end_);
        if (p < end_ && *p == (c == '{' ? '}' : ']')) {
          ++p;
          --depth;
        } else {
          if (kind == Kind::Object) TERN_RETURN_IF_ERROR(key(p));
          continue;
        }
      } else {
        if (c == '"') {
          kind = Kind::String;
          TERN_RETURN_IF_ERROR(string(p));
        } else if (c == '-' || is_digit(c)) {
          kind = Kind::Number;
          TERN_RETURN_IF_ERROR(number(p));
        } else if (c == 't' || c == 'f') {
          kind = Kind::Bool;
          TERN_RETURN_IF_ERROR(literal(p, c == 't' ? "true" : "false"));
        } else if (c == 'n') {
          kind = Kind::Null;
          TERN_RETURN_IF_ERROR(literal(p, "null"));
        } else {
          return error(p, "unexpected character");
        }
        if (depth == 0) out->kind = kind;
      }
      // A value ended at p: close containers while their closer follows.
      for (;;) {
        if (depth == 0) {
          out->end = p;
          return Error::Ok;
        }
        p = skip_space(p, end_);
        if (p >= end_) return error(p, "unexpected end of the text");
        const bool object = stack[depth - 1] == Kind::Object;
        if (*p == ',') {
          p = skip_space(p + 1, end_);
          if (object) TERN_RETURN_IF_ERROR(key(p));
          break;
        }
        if (*p != (object ? '}' : ']')) return error(p, object ? "expected ',' or '}'" : "expected ',' or ']'");
        ++p;
        --depth;
      }
    }
  }

  // A member's key and colon; leaves p at its value.
  Error key(const char*& p) {
    if (p >= end_ || *p != '"') return error(p, "expected a string key");
    TERN_RETURN_IF_ERROR(string(p));
    p = skip_space(p, end_);
    if (p >= end_ || *p != ':') return error(p, "expected ':' after the key");
    p = skip_space(p + 1, end_);
    return Error::Ok;
  }

  const char* begin_;
  const char* end_;
};

// The end of the (valid) value starting at p.
const char* skip_value(const char* p, const char* end) {
  int depth = 0;
  do {
    const char c = *p;
    if (c == '"') {
      ++p;
      while (*p != '"') p += *p == '\\' ? 2 : 1;
      ++p;
    } else if (c == '{' || c == '[') {
      ++depth;
      ++p;
    } else if (c == '}' || c == ']') {
      --depth;
      ++p;
    } else if (c == ',' || c == ':' || is_space(c)) {
      ++p;
    } else {
      while (p < end && *p != ',' && *p != '}' && *p != ']' && !is_space(*p)) ++p;
    }
  } while (depth > 0 && p < end);
  return p;
}

Kind kind_at(const char* p) {
  switch (*p) {
    case '{': return Kind::Object;
    case '[': return Kind::Array;
    case '"': return Kind::String;
    case 't':
    case 'f': return Kind::Bool;
    case 'n': return Kind::Null;
    default: return Kind::Number;
  }
}

Value value_at(const char* p, const char* end) {
  Value v;
  v.kind = kind_at(p);
  v.begin = p;
  v.end = skip_value(p, end);
  return v;
}

}  // namespace

Result<Value> parse(const char* text, size_t size) {
  if (text == nullptr && size != 0) return fail(Error::InvalidArgument, "JSON: null text");
  return Validator(text == nullptr ? "" : text, size).run();
}

Members::Members(const Value& object)
    : p_(object.kind == Kind::Object ? object.begin + 1 : object.end), end_(object.end - 1) {}

bool Members::next(Value* key, Value* value) {
  p_ = skip_space(p_, end_);
  if (p_ < end_ && *p_ == ',') p_ = skip_space(p_ + 1, end_);
  if (p_ >= end_ || *p_ != '"') return false;
  *key = value_at(p_, end_);
  p_ = skip_space(key->end, end_) + 1;  // past ':'
  p_ = skip_space(p_, end_);
  *value = value_at(p_, end_);
  p_ = value->end;
  return true;
}

Items::Items(const Value& array) : p_(array.kind == Kind::Array ? array.begin + 1 : array.end), end_(array.end - 1) {}

bool Items::next(Value* item) {
  p_ = skip_space(p_, end_);
  if (p_ < end_ && *p_ == ',') p_ = skip_space(p_ + 1, end_);
  if (p_ >= end_ || *p_ == ']') return false;
  *item = value_at(p_, end_);
  p_ = item->end;
  return true;
}

size_t count_items(const Value& array) {
  Items items(array);
  Value v;
  size_t n = 0;
  while (items.next(&v)) ++n;
  return n;
}

bool percent_decode(const char* in, char* out) {
  auto hex = [](char c) {
    const char lower = static_cast<char>(c | 0x20);
    return c >= '0' && c <= '9' ? c - '0' : lower >= 'a' && lower <= 'f' ? lower - 'a' + 10 : -1;
  };
  for (; *in != '\0'; ++out) {
    if (*in != '%') {
      *out = *in++;
      continue;
    }
    const int h = hex(in[1]), l = h < 0 ? -1 : hex(in[2]);
    if (l < 0 || h + l == 0) return false;
    *out = static_cast<char>(h * 16 + l);
    in += 3;
  }
  *out = '\0';
  return true;
}

bool at_pointer(const Value& root, const char* pointer, Value* out) {
  Value at = root;
  const char* p = pointer;
  if (*p != '\0' && *p != '/') return false;
  while (*p == '/') {
    ++p;
    char segment[256];
    size_t k = 0;
    while (*p != '\0' && *p != '/') {
      if (k == sizeof segment - 1) return false;
      char c = *p++;
      if (c == '~' && (*p == '0' || *p == '1')) c = *p++ == '0' ? '~' : '/';
      segment[k++] = c;
    }
    segment[k] = '\0';
    Value next;
    bool found = false;
    if (at.kind == Kind::Object) {
      found = find(at, segment, &next);
    } else if (at.kind == Kind::Array) {
      char* end = nullptr;
      const long index = std::strtol(segment, &end, 10);
      Items items(at);
      for (long i = 0; *end == '\0' && k > 0 && items.next(&next); ++i) {
        if (i == index) {
          found = true;
          break;
        }
      }
    }
    if (!found) return false;
    at = next;
  }
  *out = at;
  return true;
}

namespace {

// Calls put(byte) for each unescaped byte of a string value: \uXXXX as UTF-8, surrogate
// pairs joined, a lone surrogate as U+FFFD. Stops early when put returns false.
template <typename Put>
void for_each_byte(const Value& s, Put put) {
  auto hex4 = [](const char* q) {
    return static_cast<uint32_t>(hex_value(q[0]) << 12 | hex_value(q[1]) << 8 | hex_value(q[2]) << 4 | hex_value(q[3]));
  };
  const char* p = s.begin + 1;
  const char* end = s.end - 1;
  while (p < end) {
    if (*p != '\\') {
      if (!put(static_cast<uint8_t>(*p++))) return;
      continue;
    }
    const char e = p[1];
    if (e != 'u') {
      static const char kFrom[] = "\"\\/bfnrt";
      static const char kTo[] = "\"\\/\b\f\n\r\t";
      if (!put(static_cast<uint8_t>(kTo[std::strchr(kFrom, e) - kFrom]))) return;
      p += 2;
      continue;
    }
    uint32_t cp = hex4(p + 2);
    p += 6;
    if (cp >= 0xD800 && cp <= 0xDBFF && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
      const uint32_t low = hex4(p + 2);
      if (low >= 0xDC00 && low <= 0xDFFF) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        p += 6;
      }
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = unicode::kReplacementChar;
    uint8_t buf[4];
    const size_t k = unicode::encode_utf8(cp, buf);
    for (size_t i = 0; i < k; ++i) {
      if (!put(buf[i])) return;
    }
  }
}

}  // namespace

size_t unescape(const Value& s, char* out, size_t capacity) {
  if (s.kind != Kind::String) return 0;
  size_t n = 0;
  for_each_byte(s, [&](uint8_t c) {
    if (n < capacity) out[n] = static_cast<char>(c);
    ++n;
    return true;
  });
  return n;
}

bool string_equals(const Value& s, const char* text, size_t size) {
  if (s.kind != Kind::String) return false;
  size_t i = 0;
  bool same = true;
  for_each_byte(s, [&](uint8_t c) {
    same = i < size && static_cast<uint8_t>(text[i]) == c;
    ++i;
    return same;
  });
  return same && i == size;
}

bool string_equals(const Value& s, const char* text) { return string_equals(s, text, std::strlen(text)); }

bool find(const Value& object, const char* key, Value* out) {
  if (object.kind != Kind::Object) return false;
  Members members(object);
  Value k, v;
  const size_t n = std::strlen(key);
  while (members.next(&k, &v)) {
    if (string_equals(k, key, n)) {
      *out = v;
      return true;
    }
  }
  return false;
}

namespace {

// A number's decimal digits without leading zeros, and the power of ten they are scaled by.
struct Decimal {
  bool negative = false;
  char digits[40];
  int count = 0;         // significant digits kept (at most 40)
  int64_t exponent = 0;  // value = digits * 10^exponent (digits dropped past 40 raise it)
  bool inexact = false;  // nonzero digits were dropped
};

Decimal decimal_of(const Value& v) {
  Decimal d;
  const char* p = v.begin;
  const char* end = v.end;
  if (p < end && *p == '-') d.negative = true, ++p;
  auto digit = [&](char c, bool fraction) {
    if (d.count == 0 && c == '0') {
      if (fraction) --d.exponent;
      return;
    }
    if (d.count < static_cast<int>(sizeof d.digits)) {
      d.digits[d.count++] = c;
      if (fraction) --d.exponent;
    } else {
      if (c != '0') d.inexact = true;
      if (!fraction) ++d.exponent;
    }
  };
  while (p < end && is_digit(*p)) digit(*p++, false);
  if (p < end && *p == '.') {
    ++p;
    while (p < end && is_digit(*p)) digit(*p++, true);
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    ++p;
    bool neg = false;
    if (p < end && (*p == '+' || *p == '-')) neg = *p++ == '-';
    int64_t e = 0;
    while (p < end && is_digit(*p)) {
      if (e < 100000) e = e * 10 + (*p - '0');
      ++p;
    }
    d.exponent += neg ? -e : e;
  }
  // Trailing zeros are part of the exponent.
  while (d.count > 0 && d.digits[d.count - 1] == '0') --d.count, ++d.exponent;
  return d;
}

}  // namespace

bool as_int64(const Value& v, int64_t* out) {
  if (v.kind != Kind::Number) return false;
  const Decimal d = decimal_of(v);
  if (d.inexact || d.exponent < 0) return false;
  if (d.count == 0) {
    *out = 0;
    return true;
  }
  if (d.count + d.exponent > 19) return false;
  uint64_t m = 0;
  for (int i = 0; i < d.count; ++i) m = m * 10 + static_cast<uint64_t>(d.digits[i] - '0');
  for (int64_t i = 0; i < d.exponent; ++i) {
    if (m > UINT64_MAX / 10) return false;
    m *= 10;
  }
  const uint64_t limit = d.negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  if (m > limit) return false;
  *out = d.negative ? static_cast<int64_t>(0 - m) : static_cast<int64_t>(m);
  return true;
}

bool floor_exact(const Value& v, int64_t* floor, bool* whole) {
  if (v.kind != Kind::Number) return false;
  const Decimal d = decimal_of(v);
  const int64_t point = d.count + d.exponent;  // digits[0, point) are the integer part
  if (point > 18) return false;
  uint64_t m = 0;
  for (int64_t i = 0; i < point; ++i) m = m * 10 + static_cast<uint64_t>(i < d.count ? d.digits[i] - '0' : 0);
  *whole = is_whole(v);
  const int64_t magnitude = static_cast<int64_t>(m);
  *floor = d.negative ? -magnitude - (*whole ? 0 : 1) : magnitude;
  return true;
}

bool is_whole(const Value& v) {
  if (v.kind != Kind::Number) return false;
  const Decimal d = decimal_of(v);
  if (d.inexact) return false;  // a nonzero digit past the 40th: taken as a fraction
  for (int64_t i = d.count + d.exponent < 0 ? 0 : d.count + d.exponent; i < d.count; ++i) {
    if (d.digits[i] != '0') return false;
  }
  return true;
}

double as_double(const Value& v) {
  if (v.kind != Kind::Number) return 0.0;
  const Decimal d = decimal_of(v);
  double m = 0.0;
  for (int i = 0; i < d.count; ++i) m = m * 10.0 + (d.digits[i] - '0');
  const double r = m * std::pow(10.0, static_cast<double>(d.exponent));
  return d.negative ? -r : r;
}

}  // namespace tern::json
