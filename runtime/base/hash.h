// FNV-1a (64-bit): the one hash the runtime and the converter use, for identities written into
// saved states (bundle, KV layout), the state file's checksum, seeds, and in-memory tables.
// Stored values depend on these constants: never change them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern {

inline constexpr uint64_t kFnv1aBasis = 0xcbf29ce484222325ull;
inline constexpr uint64_t kFnv1aPrime = 0x100000001b3ull;

// One byte into a running hash: tables that extend a prefix's hash a byte at a time use it.
constexpr uint64_t fnv1a_step(uint64_t h, uint8_t byte) { return (h ^ byte) * kFnv1aPrime; }

// `size` bytes into the running hash `h` (a fresh hash starts at kFnv1aBasis).
inline uint64_t fnv1a(const void* data, size_t size, uint64_t h = kFnv1aBasis) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) h = fnv1a_step(h, p[i]);
  return h;
}

// A 64-bit value's eight bytes, least significant first, whatever the host's byte order.
constexpr uint64_t fnv1a_u64(uint64_t h, uint64_t value) {
  for (int i = 0; i < 8; ++i) h = fnv1a_step(h, static_cast<uint8_t>(value >> (8 * i)));
  return h;
}

}  // namespace tern
