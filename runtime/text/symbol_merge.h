// Merging neighbouring symbols of a run, best pair first: the pair queue (a binary heap) and
// Hugging Face BPE's merge by rank. Internal to the runtime.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace tern::tokenizer_detail {

struct QueuedPair {
  float key;      // higher merges first: SentencePiece score, or -rank for BPE
  uint32_t left;  // symbol index; ties merge the leftmost pair first
  uint32_t right;
  int32_t aux;  // BPE: merged id; SentencePiece: merged length in bytes
};

inline bool before(const QueuedPair& a, const QueuedPair& b) {
  if (a.key != b.key) return a.key > b.key;
  return a.left < b.left;
}

// A binary heap over a caller-provided array.
struct PairQueue {
  QueuedPair* items;
  size_t size = 0;
  size_t capacity;

  void push(const QueuedPair& p) {
    size_t i = size++;
    items[i] = p;
    while (i > 0) {
      size_t parent = (i - 1) / 2;
      if (!before(items[i], items[parent])) break;
      std::swap(items[i], items[parent]);
      i = parent;
    }
  }
  QueuedPair pop() {
    QueuedPair top = items[0];
    items[0] = items[--size];
    size_t i = 0;
    for (;;) {
      size_t l = 2 * i + 1, r = l + 1, best = i;
      if (l < size && before(items[l], items[best])) best = l;
      if (r < size && before(items[r], items[best])) best = r;
      if (best == i) break;
      std::swap(items[i], items[best]);
      i = best;
    }
    return top;
  }
};

struct BpeSymbol {
  int32_t prev, next, id;  // id -1: merged into its left neighbour
};

// Merges neighbouring symbols of sym[0..n) (linked by prev/next from 0) by rank, lowest
// first and leftmost among equals, until no neighbours have a merge: Hugging Face BPE.
// lookup(left, right, &rank) gives the merged id or -1. `items` holds 3 * n pairs.
template <typename Lookup>
void merge_by_rank(BpeSymbol* sym, size_t n, QueuedPair* items, Lookup lookup) {
  PairQueue queue{items, 0, 3 * n};
  auto try_pair = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    uint32_t rank = 0;
    const int32_t merged = lookup(sym[l].id, sym[r].id, &rank);
    if (merged >= 0) {
      queue.push({-static_cast<float>(rank), static_cast<uint32_t>(l), static_cast<uint32_t>(r), merged});
    }
  };
  for (int32_t i = 0; i >= 0 && sym[i].next >= 0; i = sym[i].next) try_pair(i, sym[i].next);
  while (queue.size > 0) {
    const QueuedPair p = queue.pop();
    BpeSymbol& l = sym[p.left];
    if (l.id < 0 || l.next != static_cast<int32_t>(p.right) || sym[p.right].id < 0) continue;
    uint32_t rank = 0;
    if (lookup(l.id, sym[p.right].id, &rank) != p.aux) continue;  // a neighbour changed since
    l.id = p.aux;
    sym[p.right].id = -1;
    l.next = sym[p.right].next;
    if (l.next >= 0) sym[l.next].prev = static_cast<int32_t>(p.left);
    try_pair(l.prev, static_cast<int32_t>(p.left));
    try_pair(static_cast<int32_t>(p.left), l.next);
  }
}

}  // namespace tern::tokenizer_detail
