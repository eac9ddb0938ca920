// Object keys other than some names, as GBNF: the text of a JSON key that is none of the names
// an object lists (additionalProperties), written as a trie over the names' code points.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/structured/gbnf_writer.h"

namespace tern {

// GBNF for one character of a key: anything but a quote, a backslash or a control character.
inline constexpr const char* kKeyChar = "[^\"\\\\\\x7F\\x00-\\x1F]";

// The names a key must differ from (~128 KB: the caller keeps it off the stack).
class ExcludedKeys {
 public:
  static constexpr size_t kMaxNames = 256;
  static constexpr size_t kMaxNameCodePoints = 128;

  void clear() { n_names_ = n_cps_ = 0; }
  // Adds a name (valid UTF-8). Null on success, else why not.
  const char* add(const char* name, size_t size);
  // Key text (no quotes) that is none of the names; any key text when there are none.
  void write(GbnfWriter& out);

 private:
  uint32_t name_cp(size_t i, size_t at) const { return name_cps_[name_start_[name_order_[i]] + at]; }
  uint32_t name_length(size_t i) const { return name_length_[name_order_[i]]; }
  void sort();
  void not_names(GbnfWriter& out, size_t at, size_t first, size_t last) const;

  uint32_t name_cps_[kMaxNames * kMaxNameCodePoints];
  uint32_t name_start_[kMaxNames];
  uint32_t name_length_[kMaxNames];
  uint32_t name_order_[kMaxNames];
  size_t n_names_ = 0;
  size_t n_cps_ = 0;
};

}  // namespace tern
