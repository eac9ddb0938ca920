// Per-position token caches: one walk over the sorted vocabulary from each terminal position,
// skipping whole subtrees of tokens that share a prefix, each cache in its smallest encoding.
#include "runtime/structured/token_caches.h"

#include <algorithm>
#include <cstring>

namespace tern::grammar_detail {

namespace {

// One position's cache from its walk: the accepted ranks (ascending) and uncertain rank
// ranges, appended to `data` in the accepted set's smallest encoding (when `*fits`).
void store_cache(const Grammar::Program& g, const GrammarVocab& v, const uint32_t* accepted, uint32_t n_accepted,
                 const uint32_t* ranges, uint32_t n_ranges, Region& region, uint32_t* data, size_t* data_size,
                 bool* fits, TokenCache& c) {
  // Accepted ranks are ascending: count their runs for the range encoding. Large sets are
  // bitsets (one OR per word at run time), the rest whichever of ids and runs is smaller.
  uint32_t runs = 0;
  for (uint32_t k = 0; k < n_accepted; ++k) runs += k == 0 || accepted[k] != accepted[k - 1] + 1 ? 1 : 0;
  if (static_cast<uint64_t>(n_accepted) * 8 > v.size()) {
    c.encoding = Accepted::Bitset;
  } else {
    c.encoding = 2 * runs < n_accepted ? Accepted::RankRanges : Accepted::Ids;
  }
  const size_t accepted_words = c.encoding == Accepted::Bitset ? g.mask_words
                                : c.encoding == Accepted::Ids  ? n_accepted
                                                               : 2 * static_cast<size_t>(runs);
  const size_t words = accepted_words + 2 * static_cast<size_t>(n_ranges);
  if (*fits && region.low<uint32_t>(words) == nullptr) *fits = false;
  if (*fits) {
    uint32_t* out = data + *data_size;
    if (c.encoding == Accepted::Bitset) {
      std::memset(out, 0, g.mask_words * sizeof(uint32_t));
      for (uint32_t k = 0; k < n_accepted; ++k) set_bit(out, v.sorted(accepted[k]));
    } else if (c.encoding == Accepted::Ids) {
      for (uint32_t k = 0; k < n_accepted; ++k) out[k] = v.sorted(accepted[k]);
    } else {
      uint32_t m = 0;
      for (uint32_t k = 0; k < n_accepted; ++k) {
        if (k == 0 || accepted[k] != accepted[k - 1] + 1) {
          out[2 * m] = accepted[k];
          ++m;
        }
        out[2 * m - 1] = accepted[k] + 1;
      }
    }
    std::memcpy(out + accepted_words, ranges, 2 * n_ranges * sizeof(uint32_t));
  }
  c.accepted = static_cast<uint32_t>(*data_size);
  c.accepted_count = c.encoding == Accepted::RankRanges ? runs : n_accepted;
  c.uncertain = static_cast<uint32_t>(*data_size + accepted_words);
  c.uncertain_count = n_ranges;
  *data_size += words;
}

}  // namespace

Error build_caches(Grammar::Program& g, const GrammarVocab& v, Region& region, size_t* needed,
                   const std::atomic<int>* abort) {
  TokenCache* caches = region.low<TokenCache>(g.n_positions);
  if (caches == nullptr) return no_room(region, "token caches");
  for (uint32_t p = 0; p < g.n_positions; ++p) caches[p] = TokenCache{};
  g.caches = caches;
  const size_t temp_mark = region.high_mark();
  uint32_t* accepted = region.high<uint32_t>(v.size());
  uint32_t* ranges = region.high<uint32_t>(2 * static_cast<size_t>(v.sorted_size()) + 2);
  if (accepted == nullptr || ranges == nullptr) return no_room(region, "the token walk");
  uint32_t* data = region.low<uint32_t>(0);
  size_t data_size = 0;
  bool fits = data != nullptr;
  Walker walker;
  for (uint32_t p = 0; p < g.n_positions; ++p) {
    const Position& at = g.positions[p];
    if (!at.terminal) continue;
    if (g.states[at.state].walked) {
      caches[p].walked = 1;
      continue;
    }
    if (abort != nullptr && abort->load(std::memory_order_relaxed) != 0) {
      return fail(Error::Aborted, "the grammar's compile was aborted (%u of %u positions walked)", p, g.n_positions);
    }
    const uint32_t* follow = g.rules[g.states[at.state].rule].follow;
    truncate(g, 2);
    new_step(g);
    const uint32_t leaf = intern(g, p, kMarkerNode);
    if (leaf == UINT32_MAX) return fail(Error::GrammarTooLarge, "no room for parse stacks");
    TERN_RETURN_IF_ERROR(walker.start(g, &leaf, 1, false));
    uint32_t n_accepted = 0, n_ranges = 0, longest = 0;
    auto uncertain = [&](uint32_t begin, uint32_t end) {
      if (n_ranges > 0 && ranges[2 * n_ranges - 1] == begin) {
        ranges[2 * n_ranges - 1] = end;
      } else {
        ranges[2 * n_ranges] = begin;
        ranges[2 * n_ranges + 1] = end;
        ++n_ranges;
      }
    };
    const uint16_t* first_row = g.dfa + static_cast<size_t>(at.dfa) * 256;
    for (uint32_t b = 0; b < 256; ++b) {
      if (first_row[b] == kDfaReject) continue;  // no token starting with b
      const uint32_t end = v.first_rank(b + 1);
      uint32_t depth_made = 0;
      for (uint32_t r = v.first_rank(b); r < end;) {
        const uint8_t* bytes = v.rank_bytes(r);
        const uint32_t n = v.rank_length(r);
        const uint32_t shared = r == v.first_rank(b) ? 0 : std::min(v.lcp(r), depth_made);
        auto reached = walker.descend(bytes, n, shared, follow);
        if (!reached.ok()) {
          walker.finish();
          return reached.error();
        }
        const uint32_t depth = *reached;
        depth_made = depth;
        const WalkLevel& level = walker.level(depth);
        if (depth == n) {
          if (level.count > 0 || level.can_end || level.accepting) {
            accepted[n_accepted++] = r;
            longest = std::max(longest, n);
          } else if (level.uncertain_before) {
            uncertain(r, r + 1);
          }
          ++r;
          continue;
        }
        // Every token with the same first `depth` bytes (and the next one, when the rule
        // can end just before it) ends the same way.
        const bool maybe = level.uncertain_before || (level.can_end && bit_set(follow, bytes[depth]));
        const uint32_t stop = std::min(end, v.subtree_end(r, level.can_end ? depth + 1 : depth));
        if (maybe) uncertain(r, stop);
        r = stop;
      }
    }
    walker.finish();
    TokenCache& c = caches[p];
    store_cache(g, v, accepted, n_accepted, ranges, n_ranges, region, data, &data_size, &fits, c);
    c.rounds_needed = g.rules[g.states[at.state].rule].loop_body ? longest : 0;
  }
  truncate(g, 2);
  g.cache_data = data;
  region.high_release(temp_mark);
  *needed = data_size * sizeof(uint32_t);
  if (!fits) return fail(Error::GrammarTooLarge, "token caches");
  return Error::Ok;
}

}  // namespace tern::grammar_detail
