// JSON written by the chat engine: strings escaped, the caller's JSON copied compactly, and a
// schema copied with its "$ref" pointers moved to where it sits in a larger document. Each
// writes to any `Out` with put(const char*, size_t) (a bounded writer that counts what does
// not fit); `json` values come from json::parse (validated text), so nothing can fail here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "runtime/structured/json_reader.h"

namespace tern::chat {

// `text` as a JSON string: the escapes JSON requires, other bytes (UTF-8) as they are.
template <typename Out>
void write_json_string(Out& out, const char* text, size_t size) {
  out.put("\"", 1);
  size_t run = 0;  // bytes since the last escape, written in one go
  for (size_t i = 0; i < size; ++i) {
    const uint8_t c = static_cast<uint8_t>(text[i]);
    const char* escape = nullptr;
    char code[8];
    switch (c) {
      case '"': escape = "\\\""; break;
      case '\\': escape = "\\\\"; break;
      case '\n': escape = "\\n"; break;
      case '\r': escape = "\\r"; break;
      case '\t': escape = "\\t"; break;
      case '\b': escape = "\\b"; break;
      case '\f': escape = "\\f"; break;
      default:
        if (c < 0x20) {
          std::snprintf(code, sizeof code, "\\u%04x", c);
          escape = code;
        }
    }
    if (escape == nullptr) {
      ++run;
      continue;
    }
    out.put(text + i - run, run);
    run = 0;
    out.put(escape, std::strlen(escape));
  }
  out.put(text + size - run, run);
  out.put("\"", 1);
}

template <typename Out>
void write_json_string(Out& out, const char* text) {
  write_json_string(out, text, std::strlen(text));
}

// `v` without white space between its tokens (strings and numbers as written). With a
// `ref_prefix`, every "$ref" member whose value starts with "#" is written "#<ref_prefix>...":
// a schema moved to the JSON pointer ref_prefix of a larger document keeps its references.
template <typename Out>
void write_json_compact(Out& out, const json::Value& v, const char* ref_prefix = nullptr) {
  if (v.kind == json::Kind::Object) {
    out.put("{", 1);
    json::Members members(v);
    json::Value key, value;
    for (bool first = true; members.next(&key, &value); first = false) {
      if (!first) out.put(",", 1);
      out.put(key.begin, key.size());
      out.put(":", 1);
      if (ref_prefix != nullptr && value.kind == json::Kind::String && value.size() >= 3 && value.begin[1] == '#' &&
          json::string_equals(key, "$ref")) {
        out.put("\"#", 2);
        out.put(ref_prefix, std::strlen(ref_prefix));
        out.put(value.begin + 2, value.size() - 2);
      } else {
        write_json_compact(out, value, ref_prefix);
      }
    }
    out.put("}", 1);
  } else if (v.kind == json::Kind::Array) {
    out.put("[", 1);
    json::Items items(v);
    json::Value item;
    for (bool first = true; items.next(&item); first = false) {
      if (!first) out.put(",", 1);
      write_json_compact(out, item, ref_prefix);
    }
    out.put("]", 1);
  } else {
    out.put(v.begin, v.size());
  }
}

}  // namespace tern::chat
