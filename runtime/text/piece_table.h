// The tokenizer's hash tables, open addressing with linear probing: piece bytes -> id and
// (left id, right id) -> merge rank and merged id. Internal to the runtime.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/text/tokenizer.h"

namespace tern {

struct Tokenizer::MergeEntry {
  int32_t left;  // -1: empty slot
  int32_t right;
  uint32_t rank;
  int32_t merged;
};

namespace tokenizer_detail {

// FNV-1a, folded so the table's low bits see the high ones (the unigram lattice extends a
// prefix's hash by a byte, fnv1a_step, and folds each).
inline uint64_t fnv_finish(uint64_t h) { return h ^ (h >> 29); }

// Slots for `entries` keys: a power of two, kept at most 2/3 full.
uint32_t table_capacity(size_t entries);

}  // namespace tokenizer_detail
}  // namespace tern
