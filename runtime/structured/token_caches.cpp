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

namespace {

// Appends [begin, end) to ascending rank ranges, joining it to the last one it touches.
void append_range(uint32_t* ranges, uint32_t* n, uint32_t begin, uint32_t end) {
  if (*n > 0 && ranges[2 * *n - 1] == begin) {
    ranges[2 * *n - 1] = end;
  } else {
    ranges[2 * *n] = begin;
    ranges[2 * *n + 1] = end;
    ++*n;
  }
}

// One walk over the vocabulary from `leaf` (a position over the marker, or over a probe's
// frame): the ranks its rule accepts whole, and the uncertain rank ranges, both ascending.
struct WalkOut {
  uint32_t* accepted;
  uint32_t n_accepted;
  uint32_t* ranges;
  uint32_t n_ranges;
};

Error walk_position(Grammar::Program& g, const GrammarVocab& v, Walker& walker, uint32_t leaf, WalkOut* out) {
  const Position& at = g.positions[g.nodes[leaf].pos];
  const uint32_t* follow = g.rules[g.states[at.state].rule].follow;
  TERN_RETURN_IF_ERROR(walker.start(g, &leaf, 1, false));
  out->n_accepted = out->n_ranges = 0;
  auto uncertain = [&](uint32_t begin, uint32_t end) { append_range(out->ranges, &out->n_ranges, begin, end); };
  const uint16_t* first_row = g.dfa + static_cast<size_t>(at.dfa) * 256;
  Error e = Error::Ok;
  for (uint32_t b = 0; b < 256 && e == Error::Ok; ++b) {
    if (first_row[b] == kDfaReject) continue;  // no token starting with b
    const uint32_t end = v.first_rank(b + 1);
    uint32_t depth_made = 0;
    for (uint32_t r = v.first_rank(b); r < end;) {
      const uint8_t* bytes = v.rank_bytes(r);
      const uint32_t n = v.rank_length(r);
      const uint32_t shared = r == v.first_rank(b) ? 0 : std::min(v.lcp(r), depth_made);
      auto reached = walker.descend(bytes, n, shared, follow);
      if (!reached.ok()) {
        e = reached.error();
        break;
      }
      const uint32_t depth = *reached;
      depth_made = depth;
      const WalkLevel& level = walker.level(depth);
      if (depth == n) {
        if (level.count > 0 || level.can_end || level.accepting) {
          out->accepted[out->n_accepted++] = r;
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
  return e;
}

// The frame of probe loop `l` with its first round under way, over the marker.
uint32_t probe_frame(Grammar::Program& g, uint32_t l) {
  return intern(g, g.n_positions + g.loops[l].base, kMarkerNode);
}

}  // namespace

Error build_caches(Grammar::Program& g, const GrammarVocab& v, Region& region, size_t* needed,
                   const std::atomic<int>* abort) {
  TokenCache* caches = region.low<TokenCache>(g.n_positions);
  if (caches == nullptr) return no_room(region, "token caches");
  uint32_t n_bodies = 0;  // terminal positions in loops' bodies: kTierRounds caches more each
  for (uint32_t p = 0; p < g.n_positions; ++p) {
    caches[p] = TokenCache{};
    const Position& at = g.positions[p];
    n_bodies += at.terminal && !g.states[at.state].walked && g.rules[g.states[at.state].rule].loop_body ? 1 : 0;
  }
  TokenCache* tiers = region.low<TokenCache>(static_cast<size_t>(n_bodies) * (kTierRounds + 1));
  if (tiers == nullptr) return no_room(region, "token caches");
  g.caches = caches;
  g.tier_caches = tiers;
  const size_t temp_mark = region.high_mark();
  WalkOut out{region.high<uint32_t>(v.size()), 0, region.high<uint32_t>(2 * static_cast<size_t>(v.sorted_size()) + 2),
              0};
  uint32_t* ranges2 = region.high<uint32_t>(2 * static_cast<size_t>(v.sorted_size()) + 2);
  if (out.accepted == nullptr || out.ranges == nullptr || ranges2 == nullptr) return no_room(region, "the token walk");
  uint32_t* data = region.low<uint32_t>(0);
  size_t data_size = 0;
  bool fits = data != nullptr;
  Walker walker;
  uint32_t n_tiers = 0;
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
    const RuleInfo& rule = g.rules[g.states[at.state].rule];
    // A loop body's position: from its endless probe (tokens up to kTierRounds long), then
    // from each probe with fewer rounds left. Anywhere else: over the marker.
    for (uint32_t k = 0; k <= (rule.loop_body ? kTierRounds : 0); ++k) {
      truncate(g, 2);
      new_step(g);
      const uint32_t below =
          rule.loop_body ? probe_frame(g, rule.probes + (k == 0 ? kTierRounds : k - 1)) : kMarkerNode;
      const uint32_t leaf = below == UINT32_MAX ? UINT32_MAX : intern(g, p, below);
      if (leaf == UINT32_MAX) return fail(Error::GrammarTooLarge, "no room for parse stacks");
      TERN_RETURN_IF_ERROR(walk_position(g, v, walker, leaf, &out));
      TokenCache& c = k == 0 ? caches[p] : tiers[n_tiers + k - 1];
      store_cache(g, v, out.accepted, out.n_accepted, out.ranges, out.n_ranges, region, data, &data_size, &fits, c);
      if (k > 0 || !rule.loop_body) continue;
      // The same walk for kTierRounds rounds left or more: tokens longer than that uncertain.
      uint32_t longest = 0, n_short = 0, n_ranges = 0;
      auto add = [&](uint32_t begin, uint32_t end) { append_range(ranges2, &n_ranges, begin, end); };
      uint32_t u = 0;
      for (uint32_t a = 0; a < out.n_accepted; ++a) {
        const uint32_t r = out.accepted[a];
        longest = std::max(longest, v.rank_length(r));
        if (v.rank_length(r) <= kTierRounds) {
          out.accepted[n_short++] = r;
          continue;
        }
        for (; u < out.n_ranges && out.ranges[2 * u] < r; ++u) add(out.ranges[2 * u], out.ranges[2 * u + 1]);
        add(r, r + 1);
      }
      for (; u < out.n_ranges; ++u) add(out.ranges[2 * u], out.ranges[2 * u + 1]);
      c.rounds_needed = longest;
      store_cache(g, v, out.accepted, n_short, ranges2, n_ranges, region, data, &data_size, &fits,
                  tiers[n_tiers + kTierRounds]);
    }
    if (rule.loop_body) {
      caches[p].tiers = n_tiers;
      n_tiers += kTierRounds + 1;
    }
  }
  truncate(g, 2);
  g.cache_data = data;
  region.high_release(temp_mark);
  *needed = data_size * sizeof(uint32_t) + static_cast<size_t>(n_bodies) * (kTierRounds + 1) * sizeof(TokenCache);
  if (!fits) return fail(Error::GrammarTooLarge, "token caches");
  return Error::Ok;
}

}  // namespace tern::grammar_detail
