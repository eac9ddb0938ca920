#pragma once

#include <cstdint>

namespace tern {

// Monotonic time in nanoseconds from an arbitrary origin; for measuring intervals only.
uint64_t monotonic_ns();

inline double seconds_between(uint64_t start_ns, uint64_t end_ns) {
  return static_cast<double>(end_ns - start_ns) * 1e-9;
}

}  // namespace tern
