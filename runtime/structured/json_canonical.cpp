#include "runtime/structured/json_canonical.h"

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace tern {

using json::Kind;
using json::Value;

bool CanonicalJson::put(const char* s, size_t k) {
  if (n + k > sizeof buf) return false;
  std::memcpy(buf + n, s, k);
  n += k;
  return true;
}

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The \uXXXX escape at s (s[0] == '\\', s[1] == 'u'), or -1.
int escape_unit(const char* s, const char* end) {
  if (end - s < 6 || s[0] != '\\' || s[1] != 'u') return -1;
  int unit = 0;
  for (int i = 2; i < 6; ++i) {
    const int h = hex_value(s[i]);
    if (h < 0) return -1;
    unit = unit * 16 + h;
  }
  return unit;
}

// Whether the string's escapes hold a surrogate that is not part of a pair.
bool has_lone_surrogate(const Value& s) {
  const char* end = s.end - 1;  // before the closing quote
  for (const char* p = s.begin + 1; p < end; ++p) {
    if (*p != '\\') continue;
    const int unit = escape_unit(p, end);
    if (unit < 0) {
      ++p;  // a one-character escape: skip what it escapes
      continue;
    }
    if (unit >= 0xDC00 && unit <= 0xDFFF) return true;
    if (unit >= 0xD800 && unit <= 0xDBFF) {
      const int low = escape_unit(p + 6, end);
      if (low < 0xDC00 || low > 0xDFFF) return true;
      p += 6;
    }
    p += 5;
  }
  return false;
}

}  // namespace

CanonicalResult canonical_json_string(const Value& s, CanonicalJson* c) {
  if (has_lone_surrogate(s)) return CanonicalResult::LoneSurrogate;
  char raw[1024];
  const size_t k = json::unescape(s, raw, sizeof raw);
  if (k > sizeof raw || !c->put("\"", 1)) return CanonicalResult::TooLong;
  for (size_t i = 0; i < k; ++i) {
    const uint8_t b = static_cast<uint8_t>(raw[i]);
    const char* e = b == '"'    ? "\\\""
                    : b == '\\' ? "\\\\"
                    : b == '\b' ? "\\b"
                    : b == '\f' ? "\\f"
                    : b == '\n' ? "\\n"
                    : b == '\r' ? "\\r"
                    : b == '\t' ? "\\t"
                                : nullptr;
    char hex[8];
    if (e == nullptr && b < 0x20) {
      std::snprintf(hex, sizeof hex, "\\u%04x", b);
      e = hex;
    }
    if (e != nullptr ? !c->put(e, std::strlen(e)) : !c->put(raw + i, 1)) return CanonicalResult::TooLong;
  }
  return c->put("\"", 1) ? CanonicalResult::Ok : CanonicalResult::TooLong;
}

CanonicalResult canonical_json(const Value& v, CanonicalJson* c) {
  if (v.kind == Kind::String) return canonical_json_string(v, c);
  return c->put(v.begin, v.size()) ? CanonicalResult::Ok : CanonicalResult::TooLong;
}

}  // namespace tern
