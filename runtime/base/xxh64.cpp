#include "runtime/base/xxh64.h"

#include <cstring>

namespace tern {
namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kP3 = 0x165667B19E3779F9ull;
constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kP5 = 0x27D4EB2F165667C5ull;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// Little-endian loads, whatever the host's byte order.
inline uint64_t load64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint32_t load32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

inline uint64_t lane_round(uint64_t acc, uint64_t input) { return rotl(acc + input * kP2, 31) * kP1; }
inline uint64_t merge_round(uint64_t acc, uint64_t v) { return (acc ^ lane_round(0, v)) * kP1 + kP4; }

// Whole 32-byte stripes of p[0, size) into the four lanes; returns the bytes consumed.
size_t consume_stripes(uint64_t* v, const uint8_t* p, size_t size) {
  uint64_t v0 = v[0], v1 = v[1], v2 = v[2], v3 = v[3];
  size_t i = 0;
  for (; i + 32 <= size; i += 32) {
    v0 = lane_round(v0, load64(p + i));
    v1 = lane_round(v1, load64(p + i + 8));
    v2 = lane_round(v2, load64(p + i + 16));
    v3 = lane_round(v3, load64(p + i + 24));
  }
  v[0] = v0, v[1] = v1, v[2] = v2, v[3] = v3;
  return i;
}

}  // namespace

Xxh64::Xxh64(uint64_t seed) : v_{seed + kP1 + kP2, seed + kP2, seed, seed - kP1}, seed_(seed) {}

void Xxh64::update(const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  total_ += size;
  if (buffered_ + size < 32) {
    if (size) std::memcpy(buffer_ + buffered_, p, size);
    buffered_ += static_cast<uint32_t>(size);
    return;
  }
  if (buffered_) {
    const size_t fill = 32 - buffered_;
    std::memcpy(buffer_ + buffered_, p, fill);
    consume_stripes(v_, buffer_, 32);
    p += fill;
    size -= fill;
    buffered_ = 0;
  }
  const size_t used = consume_stripes(v_, p, size);
  buffered_ = static_cast<uint32_t>(size - used);
  if (buffered_) std::memcpy(buffer_, p + used, buffered_);
}

void Xxh64::update_zeros(uint64_t size) {
  static const uint8_t zeros[4096] = {};
  while (size > 0) {
    const size_t n = size < sizeof zeros ? static_cast<size_t>(size) : sizeof zeros;
    update(zeros, n);
    size -= n;
  }
}

uint64_t Xxh64::digest() const {
  uint64_t h;
  if (total_ >= 32) {
    h = rotl(v_[0], 1) + rotl(v_[1], 7) + rotl(v_[2], 12) + rotl(v_[3], 18);
    for (uint64_t v : v_) h = merge_round(h, v);
  } else {
    h = seed_ + kP5;
  }
  h += total_;
  const uint8_t* p = buffer_;
  uint32_t n = buffered_;
  for (; n >= 8; n -= 8, p += 8) h = rotl(h ^ lane_round(0, load64(p)), 27) * kP1 + kP4;
  if (n >= 4) {
    h = rotl(h ^ (static_cast<uint64_t>(load32(p)) * kP1), 23) * kP2 + kP3;
    n -= 4;
    p += 4;
  }
  for (; n > 0; --n, ++p) h = rotl(h ^ (*p * kP5), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

uint64_t xxh64(const void* data, size_t size, uint64_t seed) {
  Xxh64 h(seed);
  h.update(data, size);
  return h.digest();
}

}  // namespace tern
