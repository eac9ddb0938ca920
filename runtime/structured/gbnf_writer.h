// GBNF text into a caller's buffer: what fits is written, the size counts all of it (so the
// caller can ask for the room it needs), and literals are escaped for GBNF.
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace tern {

// Writes what fits (keeping room for the NUL finish() adds) and counts all of it.
class GbnfWriter {
 public:
  GbnfWriter(char* buf, size_t capacity) : buf_(buf), capacity_(capacity) {}
  void put(const char* s, size_t n) {
    for (size_t i = 0; i < n; ++i, ++size_) {
      if (size_ + 1 < capacity_) buf_[size_] = s[i];
    }
  }
  void put(const char* s) { put(s, std::strlen(s)); }
  void printf(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    char tmp[128];
    va_list args;
    va_start(args, fmt);
    const int n = std::vsnprintf(tmp, sizeof tmp, fmt, args);
    va_end(args);
    if (n > 0) put(tmp, static_cast<size_t>(n) < sizeof tmp ? static_cast<size_t>(n) : sizeof tmp - 1);
  }
  // A GBNF literal of raw bytes.
  void literal(const char* s, size_t n) {
    put("\"");
    for (size_t i = 0; i < n; ++i) {
      const uint8_t c = static_cast<uint8_t>(s[i]);
      if (c == '"' || c == '\\') {
        char e[2] = {'\\', static_cast<char>(c)};
        put(e, 2);
      } else if (c < 0x20 || c == 0x7F) {
        printf("\\x%02X", c);
      } else {
        put(s + i, 1);
      }
    }
    put("\"");
  }
  size_t size() const { return size_; }
  void finish() {
    if (capacity_ > 0) buf_[size_ < capacity_ ? size_ : capacity_ - 1] = '\0';
  }

 private:
  char* buf_;
  size_t capacity_;
  size_t size_ = 0;
};

}  // namespace tern
