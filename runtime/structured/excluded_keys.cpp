// Object keys other than some names: the names sorted by code points, then at each depth a
// character no name continues with, or one that some do and the same again past it.
#include "runtime/structured/excluded_keys.h"

#include "runtime/text/unicode.h"

namespace tern {

namespace {

void class_char(GbnfWriter& out, uint32_t cp) {
  if (cp == ']' || cp == '[' || cp == '\\' || cp == '^' || cp == '-' || cp == '"') {
    out.printf("\\%c", static_cast<char>(cp));
  } else if (cp < 0x20 || cp == 0x7F) {
    out.printf("\\x%02X", cp);
  } else {
    uint8_t utf8[4];
    const size_t len = unicode::encode_utf8(cp, utf8);
    out.put(reinterpret_cast<const char*>(utf8), len);
  }
}

}  // namespace

const char* ExcludedKeys::add(const char* name, size_t size) {
  if (n_names_ == kMaxNames) return "property names too many or too long to exclude";
  name_start_[n_names_] = static_cast<uint32_t>(n_cps_);
  for (size_t i = 0; i < size;) {
    const unicode::Decoded d = unicode::decode_utf8(reinterpret_cast<const uint8_t*>(name + i), size - i);
    if (n_cps_ - name_start_[n_names_] == kMaxNameCodePoints) return "a property name too long to exclude";
    name_cps_[n_cps_++] = d.cp;
    i += d.length;
  }
  name_length_[n_names_] = static_cast<uint32_t>(n_cps_ - name_start_[n_names_]);
  name_order_[n_names_] = static_cast<uint32_t>(n_names_);
  ++n_names_;
  return nullptr;
}

void ExcludedKeys::write(GbnfWriter& out) {
  if (n_names_ == 0) {
    out.put(kKeyChar);
    out.put("*");
    return;
  }
  sort();
  not_names(out, 0, 0, n_names_);
}

// Code point order, for the trie walk.
void ExcludedKeys::sort() {
  auto less = [&](uint32_t a, uint32_t b) {
    const uint32_t la = name_length_[a], lb = name_length_[b];
    for (uint32_t i = 0; i < la && i < lb; ++i) {
      const uint32_t x = name_cps_[name_start_[a] + i], y = name_cps_[name_start_[b] + i];
      if (x != y) return x < y;
    }
    return la < lb;
  };
  for (size_t i = 1; i < n_names_; ++i) {
    const uint32_t x = name_order_[i];
    size_t j = i;
    while (j > 0 && less(x, name_order_[j - 1])) name_order_[j] = name_order_[j - 1], --j;
    name_order_[j] = x;
  }
}

// Key text (no quote, backslash or control character) that is none of the sorted names
// [first, last), which all start with the `at` code points written so far.
void ExcludedKeys::not_names(GbnfWriter& out, size_t at, size_t first, size_t last) const {
  size_t i = first;
  bool complete = false;  // a name ends here: the key may not stop
  while (i < last && name_length(i) == at) complete = true, ++i;
  // A character no name continues with, then anything.
  out.put("( [^\"\\\\\\x7F\\x00-\\x1F");
  for (size_t j = i; j < last; ++j) {
    if (j == i || name_cp(j, at) != name_cp(j - 1, at)) class_char(out, name_cp(j, at));
  }
  out.put("] ");
  out.put(kKeyChar);
  out.put("*");
  // Or the next character of some names, and the same again past it.
  for (size_t j = i; j < last;) {
    const uint32_t c = name_cp(j, at);
    size_t end = j;
    while (end < last && name_cp(end, at) == c) ++end;
    uint8_t utf8[4];
    const size_t len = unicode::encode_utf8(c, utf8);
    out.put(" | ");
    out.literal(reinterpret_cast<const char*>(utf8), len);
    out.put(" ");
    not_names(out, at + 1, j, end);
    j = end;
  }
  out.put(complete ? " )" : " )?");
}

}  // namespace tern
