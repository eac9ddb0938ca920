// The tokenizer's hash tables: building the piece and merge tables in the arena, and their lookups.
#include "runtime/text/piece_table.h"

#include <algorithm>
#include <cstring>

#include "runtime/base/hash.h"
#include "runtime/text/tokenizer_internal.h"

namespace tern {
using namespace tokenizer_detail;

namespace {

uint64_t hash_bytes(const uint8_t* p, size_t n) { return fnv_finish(fnv1a(p, n)); }

uint64_t hash_pair(uint32_t a, uint32_t b) {
  uint64_t x = (static_cast<uint64_t>(a) << 32) | b;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

}  // namespace

namespace tokenizer_detail {

uint32_t table_capacity(size_t entries) {
  size_t cap = 16;
  while (cap < entries + entries / 2) cap <<= 1;
  return static_cast<uint32_t>(cap);
}

}  // namespace tokenizer_detail

Error Tokenizer::build_piece_table(ArenaAllocator& arena, uint32_t capacity) {
  // piece bytes -> id; the first of duplicate pieces wins.
  TERN_ASSIGN_OR_RETURN(int32_t * pieces, arena.allocate_array<int32_t>(capacity, ArenaPurpose::Tokenizer, 64));
  std::fill(pieces, pieces + capacity, -1);
  piece_table_ = pieces;
  piece_table_mask_ = capacity - 1;
  for (int32_t id = 0; id < vocab_size_; ++id) {
    const PieceView p = piece(id);
    uint32_t slot =
        static_cast<uint32_t>(hash_bytes(reinterpret_cast<const uint8_t*>(p.data), p.size)) & piece_table_mask_;
    bool duplicate = false;
    while (pieces[slot] >= 0) {
      const PieceView q = piece(pieces[slot]);
      if (q.size == p.size && std::memcmp(q.data, p.data, p.size) == 0) {
        duplicate = true;
        break;
      }
      slot = (slot + 1) & piece_table_mask_;
    }
    if (!duplicate) pieces[slot] = id;
  }
  return Error::Ok;
}

Error Tokenizer::build_merge_table(ArenaAllocator& arena, uint32_t capacity) {
  // (left, right) -> rank and merged piece.
  TERN_ASSIGN_OR_RETURN(MergeEntry * merges, arena.allocate_array<MergeEntry>(capacity, ArenaPurpose::Tokenizer, 64));
  for (uint32_t i = 0; i < capacity; ++i) merges[i] = {-1, -1, 0, -1};
  merge_table_ = merges;
  merge_table_mask_ = capacity - 1;
  const auto* m = fb_->merges();
  const uint32_t count = m ? m->size() / 2 : 0;
  const uint32_t vocab = static_cast<uint32_t>(vocab_size_);
  char joined[2 * kMaxPieceBytes];
  for (uint32_t rank = 0; rank < count; ++rank) {
    const uint32_t l = m->Get(2 * rank), r = m->Get(2 * rank + 1);
    TERN_CHECK_OR_RETURN(l < vocab && r < vocab, Error::InvalidBundle, "merge %u names id out of range", rank);
    const PieceView a = piece(static_cast<int32_t>(l)), b = piece(static_cast<int32_t>(r));
    TERN_CHECK_OR_RETURN(a.size + b.size <= sizeof joined, Error::InvalidBundle, "merge %u is too long", rank);
    std::memcpy(joined, a.data, a.size);
    std::memcpy(joined + a.size, b.data, b.size);
    const int32_t merged = find_piece(joined, a.size + b.size);
    TERN_CHECK_OR_RETURN(merged >= 0, Error::InvalidBundle, "merge %u makes a piece not in the vocabulary", rank);
    uint32_t slot = static_cast<uint32_t>(hash_pair(l, r)) & merge_table_mask_;
    bool seen = false;
    while (merges[slot].left >= 0) {
      if (merges[slot].left == static_cast<int32_t>(l) && merges[slot].right == static_cast<int32_t>(r)) {
        seen = true;  // a repeated merge keeps its first (best) rank
        break;
      }
      slot = (slot + 1) & merge_table_mask_;
    }
    if (!seen) merges[slot] = {static_cast<int32_t>(l), static_cast<int32_t>(r), rank, merged};
  }
  return Error::Ok;
}

int32_t Tokenizer::find_piece(const char* bytes, size_t size) const {
  if (piece_table_ == nullptr) return -1;
  const uint8_t* b = reinterpret_cast<const uint8_t*>(bytes);
  return find_piece_hashed(b, size, hash_bytes(b, size));
}

int32_t Tokenizer::find_piece_hashed(const uint8_t* bytes, size_t size, uint64_t hash) const {
  uint32_t slot = static_cast<uint32_t>(hash) & piece_table_mask_;
  for (;;) {
    const int32_t id = piece_table_[slot];
    if (id < 0) return -1;
    const PieceView p = piece(id);
    if (p.size == size && std::memcmp(p.data, bytes, size) == 0) return id;
    slot = (slot + 1) & piece_table_mask_;
  }
}

int32_t Tokenizer::lookup_merge(int32_t left, int32_t right, uint32_t* rank) const {
  uint32_t slot =
      static_cast<uint32_t>(hash_pair(static_cast<uint32_t>(left), static_cast<uint32_t>(right))) & merge_table_mask_;
  for (;;) {
    const MergeEntry& e = merge_table_[slot];
    if (e.left < 0) return -1;
    if (e.left == left && e.right == right) {
      *rank = e.rank;
      return e.merged;
    }
    slot = (slot + 1) & merge_table_mask_;
  }
}

}  // namespace tern
