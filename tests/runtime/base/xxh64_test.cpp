// XXH64 against values printed by the reference implementation (`xxhsum -H1`, xxHash 0.8.1,
// Debian's xxhash package), whole and fed in pieces of every size.
#include "runtime/base/xxh64.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace tern {
namespace {

struct Vector {
  std::string text;
  uint64_t expected;
};

// printf %s TEXT | xxhsum -H1
const Vector kVectors[] = {
    {"", 0xef46db3751d8e999ull},
    {"a", 0xd24ec4f1a98c6e5bull},
    {"abc", 0x44bc2cf5ad770999ull},
    {"0123456789abcdef0123456789abcdefXYZ", 0x654f6a2b39e4d8c1ull},
    {"The quick brown fox jumps over the lazy dog, then over it again and again.", 0x01af0aea264e6c56ull},
};

TEST(Xxh64, MatchesTheReference) {
  for (const Vector& v : kVectors) EXPECT_EQ(xxh64(v.text.data(), v.text.size()), v.expected) << v.text;
}

TEST(Xxh64, PiecesOfAnySizeGiveTheSameHash) {
  for (const Vector& v : kVectors) {
    for (size_t piece = 1; piece <= 40; ++piece) {
      Xxh64 h;
      for (size_t i = 0; i < v.text.size(); i += piece) h.update(v.text.data() + i, std::min(piece, v.text.size() - i));
      EXPECT_EQ(h.digest(), v.expected) << v.text << " in pieces of " << piece;
    }
  }
}

TEST(Xxh64, ZerosAreZeroBytes) {
  // update_zeros (the writer's holes, the checksum's own fields) against the bytes themselves.
  std::vector<uint8_t> bytes(10000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 131 + 7);
  std::fill(bytes.begin() + 1000, bytes.begin() + 9000, 0);
  Xxh64 h;
  h.update(bytes.data(), 1000);
  h.update_zeros(8000);
  h.update(bytes.data() + 9000, 1000);
  EXPECT_EQ(h.digest(), xxh64(bytes.data(), bytes.size()));
}

}  // namespace
}  // namespace tern
