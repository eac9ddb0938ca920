// Byte sizes on the command lines of tern-run and tern-plan: "512M", "1.5GiB", "4096".
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

namespace tern::cli {

// K/M/G are powers of 1024, optionally followed by "i" and "B"; false on anything else.
inline bool parse_size(const std::string& text, uint64_t* out) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || v < 0) return false;
  double mult = 1;
  switch (*end) {
    case 'k': case 'K': mult = 1024.0; ++end; break;
    case 'm': case 'M': mult = 1024.0 * 1024; ++end; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; ++end; break;
    default: break;
  }
  if (*end == 'i') ++end;
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0') return false;
  *out = static_cast<uint64_t>(v * mult);
  return true;
}

inline double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace tern::cli
