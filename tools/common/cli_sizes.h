// Byte counts as the CLIs print them (sizes are parsed by tern_parse_byte_size).
#pragma once

#include <cstdint>

namespace tern::cli {

inline double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace tern::cli
