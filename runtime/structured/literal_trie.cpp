// The trie is built without recursion: each work item covers the literals sharing a prefix and
// patches the state that leads to it, so a long shared prefix costs no stack.
#include "runtime/structured/literal_trie.h"

#include <algorithm>
#include <cstring>

namespace tern::grammar_detail {

namespace {
constexpr uint32_t kNoState = 0xFFFFFFFFu;
}  // namespace

Result<uint32_t> build_literal_trie(const Literals& set, uint32_t next, Region& region, TrieStates& out) {
  const uint32_t n = set.count;
  uint32_t* order = region.high<uint32_t>(n + 1);
  size_t total = 0;
  for (uint32_t i = 0; i < n; ++i) total += set.length[i];
  // Work: order[lo, hi) share `depth` bytes; `patch` leads there (its first way on), or the
  // item is the trie's start.
  struct Work {
    uint32_t lo, hi, depth, patch;
    bool start;
  };
  Work* work = region.high<Work>(total + 2);
  if (order == nullptr || work == nullptr) return no_room(region, "an alternation of literals");
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  auto less = [&](uint32_t x, uint32_t y) {
    const int c =
        std::memcmp(set.bytes + set.begin[x], set.bytes + set.begin[y], std::min(set.length[x], set.length[y]));
    return c < 0 || (c == 0 && set.length[x] < set.length[y]);
  };
  std::sort(order, order + n, less);
  auto at = [&](uint32_t k, uint32_t depth) { return set.bytes[set.begin[order[k]] + depth]; };
  uint32_t n_work = 0, start = kNoState;
  work[n_work++] = Work{0, n, 0, 0, true};
  while (n_work > 0) {
    const Work w = work[--n_work];
    uint32_t entry = kNoState;
    auto add_branch = [&](uint32_t first) -> Error {
      if (entry == kNoState) {
        entry = first;
        return Error::Ok;
      }
      TERN_ASSIGN_OR_RETURN(entry, out.either(first, entry));
      return Error::Ok;
    };
    uint32_t lo = w.lo;
    if (set.length[order[lo]] == w.depth) {  // a literal ends here
      TERN_RETURN_IF_ERROR(add_branch(next));
      while (lo < w.hi && set.length[order[lo]] == w.depth) ++lo;
    }
    while (lo < w.hi) {
      const uint8_t b = at(lo, w.depth);
      uint32_t hi = lo + 1;
      while (hi < w.hi && at(hi, w.depth) == b) ++hi;
      bool alone = true;  // one literal (or equal ones): a chain of its remaining bytes
      for (uint32_t j = lo + 1; j < hi && alone; ++j) alone = !less(order[lo], order[j]);
      TERN_ASSIGN_OR_RETURN(const uint32_t first, out.byte(b, next));
      if (alone) {
        const uint32_t lit = order[lo];
        uint32_t prev = first;
        for (uint32_t d = w.depth + 1; d < set.length[lit]; ++d) {
          TERN_ASSIGN_OR_RETURN(const uint32_t s, out.byte(set.bytes[set.begin[lit] + d], next));
          out.go_on(prev, s);
          prev = s;
        }
      } else {
        work[n_work++] = Work{lo, hi, w.depth + 1, first, false};
      }
      TERN_RETURN_IF_ERROR(add_branch(first));
      lo = hi;
    }
    if (w.start) {
      start = entry;
    } else {
      out.go_on(w.patch, entry);
    }
  }
  return start;
}

}  // namespace tern::grammar_detail
