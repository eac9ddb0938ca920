// XXH64 (Yann Collet's xxHash, 64-bit variant; written from its specification,
// doc/xxhash_spec.md of github.com/Cyan4973/xxHash): the hash of bulk bytes, used for the
// bundle checksum (schema/README.md). FNV-1a (hash.h) stays the hash of everything else:
// it is written into saved states (changing it would orphan every saved session) and its
// byte-at-a-time step extends prefix hashes in tables, which XXH64 cannot do. XXH64 is here
// because FNV-1a is too slow for whole bundles: one multiply per byte, a dependency chain
// (0.15-0.75 GB/s measured on a 1 GiB buffer), where XXH64 runs four independent lanes of
// 8 bytes (several GB/s, the speed of reading the page cache). Its values are stored in
// bundles: never change it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern {

// Streaming XXH64: update() with the bytes in order, in pieces of any size, then digest().
class Xxh64 {
 public:
  explicit Xxh64(uint64_t seed = 0);
  void update(const void* data, size_t size);
  // `size` zero bytes (holes in a sparse file, fields counted as zero).
  void update_zeros(uint64_t size);
  uint64_t digest() const;

 private:
  uint64_t total_ = 0;
  uint64_t v_[4];
  uint64_t seed_;
  uint8_t buffer_[32];
  uint32_t buffered_ = 0;
};

// XXH64 of one buffer.
uint64_t xxh64(const void* data, size_t size, uint64_t seed = 0);

}  // namespace tern
