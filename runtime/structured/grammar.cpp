// The grammar matcher: interned stack frames, stepping over bytes, token masks, drafts.
// The compiler is in grammar_compile.cpp.
#include "runtime/structured/grammar.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/structured/grammar_program.h"
#include "runtime/text/tokenizer.h"
#include "schema/tokenizer_generated.h"

namespace tern {

using namespace grammar_detail;

// ---- The vocabulary ----

size_t GrammarVocab::required_arena_bytes(const schema::Tokenizer* table) {
  if (table == nullptr || table->piece_offsets() == nullptr || table->piece_offsets()->size() < 2 ||
      table->piece_bytes() == nullptr) {
    return 0;
  }
  const size_t n = table->piece_offsets()->size() - 1;
  // SentencePiece text is never longer than its piece, except <unk>'s surface.
  const size_t unk = table->unk_surface() != nullptr ? table->unk_surface()->size() : 8;
  const size_t bytes = table->piece_bytes()->size() + unk + 8;
  // The bytes and offsets by id, then again by rank; the sorted ids; the common prefixes.
  return 2 * (align_up(bytes, 64) + 64 + align_up((n + 1) * sizeof(uint32_t), 64) + 64) +
         align_up(n * sizeof(uint32_t), 64) + 64 + align_up(n + 1, 64) + 64 + align_up(n / kLcpBlock + 1, 64) + 64;
}

Error GrammarVocab::build(const Tokenizer& tokenizer, uint32_t n_tokens, ArenaAllocator& arena) {
  const uint32_t n = std::min<uint32_t>(n_tokens, static_cast<uint32_t>(tokenizer.vocab_size()));
  TERN_CHECK_OR_RETURN(n > 0, Error::InvalidArgument, "grammar vocabulary: no tokens");
  TERN_ASSIGN_OR_RETURN(uint32_t * offsets, arena.allocate_array<uint32_t>(n + 1, ArenaPurpose::Tokenizer, 64));
  // Sizes first, then the bytes in one block.
  uint8_t piece[4096];
  size_t total = 0;
  for (uint32_t id = 0; id < n; ++id) {
    offsets[id] = static_cast<uint32_t>(total);
    total += tokenizer.token_bytes(static_cast<int32_t>(id), piece, sizeof piece);
  }
  offsets[n] = static_cast<uint32_t>(total);
  TERN_ASSIGN_OR_RETURN(uint8_t * bytes, arena.allocate_array<uint8_t>(total + 1, ArenaPurpose::Tokenizer, 64));
  for (uint32_t id = 0; id < n; ++id) {
    (void)tokenizer.token_bytes(static_cast<int32_t>(id), bytes + offsets[id], offsets[id + 1] - offsets[id]);
  }
  const int32_t ends[] = {tokenizer.eos_id(), tokenizer.eot_id()};
  return build(bytes, offsets, n, ends, 2, arena);
}

Error GrammarVocab::build(const uint8_t* bytes, const uint32_t* offsets, uint32_t n, const int32_t* end_tokens,
                          uint32_t n_end_tokens, ArenaAllocator& arena) {
  TERN_CHECK_OR_RETURN(n > 0 && bytes != nullptr && offsets != nullptr, Error::InvalidArgument,
                       "grammar vocabulary: no tokens");
  n_end_tokens_ = 0;
  for (uint32_t i = 0; i < n_end_tokens; ++i) {
    const int32_t id = end_tokens[i];
    bool known = false;
    for (uint32_t j = 0; j < n_end_tokens_; ++j) known |= end_tokens_[j] == id;
    if (id >= 0 && static_cast<uint32_t>(id) < n && !known && n_end_tokens_ < 4) end_tokens_[n_end_tokens_++] = id;
  }
  // Tokens with text, end tokens aside (they end the text wherever it may end).
  auto has_text = [&](uint32_t id) {
    for (uint32_t j = 0; j < n_end_tokens_; ++j) {
      if (end_tokens_[j] == static_cast<int32_t>(id)) return false;
    }
    return offsets[id + 1] > offsets[id];
  };
  uint32_t n_sorted = 0, max_length = 0;
  for (uint32_t id = 0; id < n; ++id) {
    n_sorted += has_text(id) ? 1 : 0;
    max_length = std::max(max_length, offsets[id + 1] - offsets[id]);
  }
  TERN_ASSIGN_OR_RETURN(uint32_t * sorted, arena.allocate_array<uint32_t>(n, ArenaPurpose::Tokenizer, 64));
  uint32_t k = 0;
  for (uint32_t id = 0; id < n; ++id) {
    if (has_text(id)) sorted[k++] = id;
  }
  std::sort(sorted, sorted + n_sorted, [&](uint32_t a, uint32_t b) {
    const uint32_t la = offsets[a + 1] - offsets[a], lb = offsets[b + 1] - offsets[b];
    const int c = std::memcmp(bytes + offsets[a], bytes + offsets[b], std::min(la, lb));
    return c < 0 || (c == 0 && (la < lb || (la == lb && a < b)));
  });
  TERN_ASSIGN_OR_RETURN(uint32_t * rank_offsets,
                        arena.allocate_array<uint32_t>(n_sorted + 1, ArenaPurpose::Tokenizer, 64));
  size_t sorted_total = 0;
  for (uint32_t r = 0; r < n_sorted; ++r) {
    rank_offsets[r] = static_cast<uint32_t>(sorted_total);
    sorted_total += offsets[sorted[r] + 1] - offsets[sorted[r]];
  }
  rank_offsets[n_sorted] = static_cast<uint32_t>(sorted_total);
  TERN_ASSIGN_OR_RETURN(uint8_t * rank_bytes,
                        arena.allocate_array<uint8_t>(sorted_total + 1, ArenaPurpose::Tokenizer, 64));
  for (uint32_t r = 0; r < n_sorted; ++r) {
    std::memcpy(rank_bytes + rank_offsets[r], bytes + offsets[sorted[r]], rank_offsets[r + 1] - rank_offsets[r]);
  }
  TERN_ASSIGN_OR_RETURN(uint8_t * lcp, arena.allocate_array<uint8_t>(n_sorted + 1, ArenaPurpose::Tokenizer, 64));
  const uint32_t blocks = n_sorted / kLcpBlock + 1;
  TERN_ASSIGN_OR_RETURN(uint8_t * block_min, arena.allocate_array<uint8_t>(blocks, ArenaPurpose::Tokenizer, 64));
  for (uint32_t b = 0; b < blocks; ++b) block_min[b] = 255;
  for (uint32_t r = 0; r < n_sorted; ++r) {
    uint32_t common = 0;
    if (r > 0) {
      const uint32_t a = sorted[r - 1], b = sorted[r];
      const uint32_t la = offsets[a + 1] - offsets[a], lb = offsets[b + 1] - offsets[b];
      const uint32_t limit = std::min<uint32_t>(std::min(la, lb), 255);
      while (common < limit && bytes[offsets[a] + common] == bytes[offsets[b] + common]) ++common;
    }
    lcp[r] = static_cast<uint8_t>(common);
    block_min[r / kLcpBlock] = std::min<uint8_t>(block_min[r / kLcpBlock], lcp[r]);
  }
  for (uint32_t b = 0, r = 0; b <= 256; ++b) {
    while (r < n_sorted && rank_bytes[rank_offsets[r]] < b) ++r;
    first_rank_[b] = r;
  }
  n_tokens_ = n;
  n_sorted_ = n_sorted;
  max_length_ = max_length;
  bytes_ = bytes;
  offsets_ = offsets;
  sorted_ = sorted;
  rank_bytes_ = rank_bytes;
  rank_offsets_ = rank_offsets;
  lcp_ = lcp;
  lcp_block_min_ = block_min;
  return Error::Ok;
}

uint32_t GrammarVocab::subtree_end(uint32_t rank, uint32_t depth) const {
  if (depth == 1) return first_rank_[rank_bytes(rank)[0] + 1];
  uint32_t r = rank + 1;
  while (r < n_sorted_) {
    if (r % kLcpBlock == 0 && lcp_block_min_[r / kLcpBlock] >= depth) {
      r += kLcpBlock;
      continue;
    }
    if (lcp_[r] < depth) return r;
    ++r;
  }
  return n_sorted_;
}

namespace grammar_detail {

namespace {

uint32_t hash_frame(uint32_t pos, uint32_t parent) {
  const uint64_t h = ((static_cast<uint64_t>(pos) << 32) | parent) * 0x9E3779B97F4A7C15ull;
  return static_cast<uint32_t>(h >> 32);
}

void rebuild_table(Program& g) {
  std::memset(g.table, 0, (static_cast<size_t>(g.table_mask) + 1) * sizeof(uint32_t));
  for (uint32_t i = 2; i < g.node_top; ++i) {
    uint32_t slot = hash_frame(g.nodes[i].pos, g.nodes[i].parent) & g.table_mask;
    while (g.table[slot] != 0) slot = (slot + 1) & g.table_mask;
    g.table[slot] = i + 1;
    g.nodes[i].slot = slot;
  }
}

Error pool_full(const Program& g) {
  return fail(Error::GrammarTooLarge, "the grammar's parse stacks outgrew their %u frames (an ambiguous grammar?)",
              g.node_capacity);
}

}  // namespace

void new_step(Program& g) {
  if (++g.stamp == 0) {  // wrapped: forget every mark
    for (uint32_t i = 0; i < g.node_top; ++i) g.nodes[i].stamp = 0;
    for (uint32_t i = 0; i <= g.visit_mask; ++i) g.visits[i].stamp = 0;
    g.stamp = 1;
  }
}

uint32_t intern(Program& g, uint32_t pos, uint32_t parent) {
  uint32_t slot = hash_frame(pos, parent) & g.table_mask;
  for (uint32_t v; (v = g.table[slot]) != 0; slot = (slot + 1) & g.table_mask) {
    const Node& n = g.nodes[v - 1];
    if (n.pos == pos && n.parent == parent) return v - 1;
  }
  if (g.node_top == g.node_capacity) return UINT32_MAX;
  const uint32_t i = g.node_top++;
  g.nodes[i] = Node{pos, parent, 0, slot};
  g.table[slot] = i + 1;
  return i;
}

void truncate(Program& g, uint32_t top) {
  while (g.node_top > top) g.table[g.nodes[--g.node_top].slot] = 0;
}

namespace {

// Marks (pos, parent) visited in this step; false when it already was.
bool first_visit(Program& g, uint32_t pos, uint32_t parent, bool* full) {
  uint32_t slot = hash_frame(pos, parent) & g.visit_mask;
  for (uint32_t probes = 0;; slot = (slot + 1) & g.visit_mask) {
    Visit& v = g.visits[slot];
    if (v.stamp != g.stamp) {
      v = Visit{pos, parent, g.stamp};
      return true;
    }
    if (v.pos == pos && v.parent == parent) return false;
    if (++probes > g.visit_mask / 2) {
      *full = true;
      return false;
    }
  }
}

Error too_ambiguous(uint32_t capacity) {
  return fail(Error::GrammarTooLarge, "more than %u parse stacks at once (an ambiguous grammar?)", capacity);
}

}  // namespace

Error expand(Program& g, uint32_t node, uint32_t* out, uint32_t* count, uint32_t capacity, uint8_t* accepting,
             uint8_t* can_end) {
  uint32_t n_work = 0;
  bool full = false, pool_exhausted = false;
  // Places to go on from, each once per step; nodes are made only for leaves and for the
  // frames a call returns to.
  auto push = [&](uint32_t pos, uint32_t parent) -> bool {
    if (!first_visit(g, pos, parent, &full)) return !full;
    if (n_work == g.worklist_capacity) return false;
    g.worklist[2 * n_work] = pos;
    g.worklist[2 * n_work + 1] = parent;
    ++n_work;
    return true;
  };
  // A loop's next round (count: the rounds done) and its exit.
  auto loop = [&](uint32_t l, uint32_t count, uint32_t parent) -> bool {
    const LoopInfo& info = g.loops[l];
    if (count >= info.min && !push(g.states[info.next].pos, parent)) return false;
    if (count >= info.max) return true;
    const uint32_t ret = intern(g, g.n_positions + info.base + std::min(count + 1, info.cap) - 1, parent);
    if (ret == UINT32_MAX) {
      pool_exhausted = true;
      return false;
    }
    return push(g.states[g.rules[info.body].start].pos, ret);
  };
  if (!push(g.nodes[node].pos, g.nodes[node].parent)) return too_ambiguous(g.worklist_capacity);
  while (n_work > 0) {
    --n_work;
    const uint32_t pos = g.worklist[2 * n_work], parent = g.worklist[2 * n_work + 1];
    if (pos >= g.n_positions) {  // a loop's return frame: a round is done
      const LoopFrame f = loop_frame(g, pos);
      if (!loop(f.loop, f.count, parent)) return pool_exhausted ? pool_full(g) : too_ambiguous(g.worklist_capacity);
      continue;
    }
    const NfaState& s = g.states[g.positions[pos].state];
    bool ok = true;
    switch (s.kind) {
      case NfaKind::Terminal: {
        const uint32_t id = intern(g, pos, parent);
        if (id == UINT32_MAX) return pool_full(g);
        if (g.nodes[id].stamp == g.stamp) break;
        g.nodes[id].stamp = g.stamp;
        if (*count == capacity) return too_ambiguous(capacity);
        out[(*count)++] = id;
        break;
      }
      case NfaKind::Split: ok = push(g.states[s.next].pos, parent) && push(g.states[s.next2].pos, parent); break;
      case NfaKind::Ref: {
        const uint32_t ret = s.tail ? parent : intern(g, g.states[s.next].pos, parent);
        if (ret == UINT32_MAX) return pool_full(g);
        ok = push(g.states[g.rules[s.arg].start].pos, ret);
        break;
      }
      case NfaKind::Count: ok = loop(s.arg, 0, parent); break;
      case NfaKind::Final:
        if (parent == kRootNode) {
          *accepting = 1;
        } else if (parent == kMarkerNode) {
          *can_end = 1;  // a cache's walk: the rule may end here
        } else {
          ok = push(g.nodes[parent].pos, g.nodes[parent].parent);
        }
        break;
    }
    if (!ok) return pool_exhausted ? pool_full(g) : too_ambiguous(g.worklist_capacity);
  }
  return Error::Ok;
}

LoopFrame loop_frame(const Program& g, uint32_t pos) {
  const uint32_t v = pos - g.n_positions;
  uint32_t lo = 0, hi = g.n_loops;  // the last loop whose base is <= v
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (g.loops[mid].base <= v) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return LoopFrame{lo, v - g.loops[lo].base + 1};
}

Error step(Program& g, const uint32_t* in, uint32_t n, uint8_t byte, uint32_t* out, uint32_t* count, uint32_t capacity,
           uint8_t* accepting, uint8_t* can_end) {
  new_step(g);
  for (uint32_t i = 0; i < n; ++i) {
    const Node leaf = g.nodes[in[i]];
    const Position& p = g.positions[leaf.pos];
    const NfaState& s = g.states[p.state];
    const uint16_t next = g.dfa[static_cast<size_t>(p.dfa) * 256 + byte];
    if (next == kDfaReject) continue;
    if (next == kDfaAccept) {
      const uint32_t id = intern(g, g.states[s.next].pos, leaf.parent);
      if (id == UINT32_MAX) return pool_full(g);
      TERN_RETURN_IF_ERROR(expand(g, id, out, count, capacity, accepting, can_end));
      continue;
    }
    // Within a character: the same terminal, a later DFA state.
    const uint32_t id = intern(g, s.pos + (next - s.arg), leaf.parent);
    if (id == UINT32_MAX) return pool_full(g);
    if (g.nodes[id].stamp == g.stamp) continue;
    g.nodes[id].stamp = g.stamp;
    if (*count == capacity) return too_ambiguous(capacity);
    out[(*count)++] = id;
  }
  return Error::Ok;
}

Error Walker::start(Program& g, const uint32_t* leaves, uint32_t n, bool accepting) {
  g_ = &g;
  node_top0_ = g.node_top;
  TERN_CHECK_OR_RETURN(n <= g.walk_capacity, Error::GrammarTooLarge, "%u parse stacks exceed the walk buffer", n);
  std::memcpy(g.walk, leaves, n * sizeof(uint32_t));
  g.levels[0] = WalkLevel{0, n, g.node_top, static_cast<uint8_t>(accepting), 0, 0, 0};
  return Error::Ok;
}

Result<uint32_t> Walker::descend(const uint8_t* bytes, uint32_t len, uint32_t shared, const uint32_t* follow) {
  Program& g = *g_;
  uint32_t d = shared;
  truncate(g, g.levels[d].node_top);
  while (d < len) {
    const WalkLevel& at = g.levels[d];
    if (at.count == 0) return d;
    WalkLevel next{};
    next.begin = at.begin + at.count;
    TERN_RETURN_IF_ERROR(step(g, g.walk + at.begin, at.count, bytes[d], g.walk + next.begin, &next.count,
                              g.walk_capacity - next.begin, &next.accepting, &next.can_end));
    next.node_top = g.node_top;
    next.uncertain_before = at.uncertain_before || (at.can_end && follow != nullptr && bit_set(follow, bytes[d]));
    g.levels[++d] = next;
  }
  return d;
}

void Walker::finish() {
  if (g_ != nullptr) truncate(*g_, node_top0_);
}

}  // namespace grammar_detail

// ---- The matcher ----

void Grammar::clear() {
  program_ = nullptr;
  vocab_ = nullptr;
  used_bytes_ = 0;
  region_ = nullptr;
  compiled_bytes_ = 0;
  copied_ = false;
  current_ = State{};
  mask_ = nullptr;
}

bool Grammar::compiled_from(const char* text, size_t size) const {
  return program_ != nullptr && program_->source_size == size &&
         (size == 0 || std::memcmp(program_->source, text, size) == 0);
}

uint32_t Grammar::rule_count() const { return program_ != nullptr ? program_->n_rules : 0; }
uint32_t Grammar::position_count() const { return program_ != nullptr ? program_->n_positions : 0; }

namespace {

void copy_state(const Grammar::State& from, Grammar::State* to) {
  std::memcpy(to->leaves, from.leaves, from.count * sizeof(uint32_t));
  to->count = from.count;
  to->accepting = from.accepting;
}

bool is_end_token(const GrammarVocab& v, int32_t token) {
  for (uint32_t i = 0; i < v.end_token_count(); ++i) {
    if (v.end_tokens()[i] == token) return true;
  }
  return false;
}

}  // namespace

void Grammar::restart() {
  if (program_ != nullptr) (void)start_state();  // checked when compiled
}

Error Grammar::start_state() {
  Program& g = *program_;
  truncate(g, 2);
  new_step(g);
  current_.count = 0;
  uint8_t accepting = 0, can_end = 0;
  const uint32_t start = intern(g, g.states[g.rules[g.root].start].pos, kRootNode);
  TERN_RETURN_IF_ERROR(expand(g, start, current_.leaves, &current_.count, current_.capacity, &accepting, &can_end));
  current_.accepting = accepting != 0;
  return Error::Ok;
}

Error Grammar::advance(const State& in, uint8_t byte, State* out) {
  uint8_t accepting = 0, can_end = 0;
  out->count = 0;
  TERN_RETURN_IF_ERROR(
      step(*program_, in.leaves, in.count, byte, out->leaves, &out->count, out->capacity, &accepting, &can_end));
  out->accepting = accepting != 0;
  return Error::Ok;
}

Error Grammar::token_step(const State& in, int32_t token, State* out, bool* allowed) {
  *allowed = false;
  const GrammarVocab& v = *vocab_;
  if (is_end_token(v, token)) {
    *allowed = in.accepting;
    if (*allowed && out != &in) copy_state(in, out);
    return Error::Ok;
  }
  if (token < 0 || static_cast<uint32_t>(token) >= v.size() || v.length(static_cast<uint32_t>(token)) == 0) {
    return Error::Ok;
  }
  const uint8_t* b = v.bytes(static_cast<uint32_t>(token));
  const uint32_t n = v.length(static_cast<uint32_t>(token));
  const State* from = &in;
  for (uint32_t i = 0; i < n; ++i) {
    if (from->count == 0) return Error::Ok;
    State* to = &scratch_[i & 1];
    TERN_RETURN_IF_ERROR(advance(*from, b[i], to));
    from = to;
  }
  if (from->count == 0 && !from->accepting) return Error::Ok;
  *allowed = true;
  copy_state(*from, out);
  return Error::Ok;
}

Error Grammar::compact(State* also) {
  Program& g = *program_;
  if (g.node_top <= g.node_capacity / 2) return Error::Ok;
  // Mark the live frames (stamp ~0), then slide them down in index order: parents come
  // before their children, so each parent is already moved when its child is.
  constexpr uint32_t kLive = 0xFFFFFFFFu;
  State* live[] = {&current_, also};
  for (State* s : live) {
    for (uint32_t i = 0; s != nullptr && i < s->count; ++i) {
      for (uint32_t id = s->leaves[i]; id > kMarkerNode && g.nodes[id].stamp != kLive; id = g.nodes[id].parent) {
        g.nodes[id].stamp = kLive;
      }
    }
  }
  uint32_t* remap = g.table;  // rebuilt below
  uint32_t top = 2;
  for (uint32_t i = 2; i < g.node_top; ++i) {
    if (g.nodes[i].stamp != kLive) continue;
    const uint32_t parent = g.nodes[i].parent;
    g.nodes[top] = Node{g.nodes[i].pos, parent > kMarkerNode ? remap[parent] : parent, 0, 0};
    remap[i] = top++;
  }
  for (State* s : live) {
    for (uint32_t i = 0; s != nullptr && i < s->count; ++i) s->leaves[i] = remap[s->leaves[i]];
  }
  g.node_top = top;
  // The step stamp goes on: a visit mark of an earlier step must not match a remapped frame.
  rebuild_table(g);
  return Error::Ok;
}

Error Grammar::accept_token(int32_t token) {
  TERN_CHECK_OR_RETURN(program_ != nullptr, Error::InvalidState, "no grammar is set");
  bool allowed = false;
  TERN_RETURN_IF_ERROR(token_step(current_, token, &staged_, &allowed));
  TERN_CHECK_OR_RETURN(allowed, Error::InvalidArgument, "token %d is not allowed by the grammar here", token);
  copy_state(staged_, &current_);
  return compact();
}

Result<bool> Grammar::accept_bytes(const uint8_t* bytes, size_t size) {
  TERN_CHECK_OR_RETURN(program_ != nullptr, Error::InvalidState, "no grammar is set");
  State* from = &current_;
  for (size_t i = 0; i < size; ++i) {
    if (from->count == 0) return false;
    State* to = &scratch_[i & 1];
    TERN_RETURN_IF_ERROR(advance(*from, bytes[i], to));
    from = to;
    // A long text (thousands of counted rounds) makes a frame per round: the dead ones go.
    TERN_RETURN_IF_ERROR(compact(from));
  }
  if (from != &current_) copy_state(*from, &current_);
  TERN_RETURN_IF_ERROR(compact());
  return true;
}

Result<bool> Grammar::allows_bytes(const State& state, const uint8_t* bytes, size_t size) {
  TERN_CHECK_OR_RETURN(program_ != nullptr, Error::InvalidState, "no grammar is set");
  const uint32_t top = program_->node_top;
  const State* from = &state;
  bool ok = true;
  for (size_t i = 0; i < size && ok; ++i) {
    if (from->count == 0) {
      ok = false;
      break;
    }
    State* to = &scratch_[i & 1];
    const Error e = advance(*from, bytes[i], to);
    if (e != Error::Ok) {
      truncate(*program_, top);
      return e;
    }
    from = to;
  }
  ok = ok && (from->count > 0 || from->accepting);
  truncate(*program_, top);
  return ok;
}

void Grammar::begin_drafts() { copy_state(current_, &drafts_[0]); }

Result<bool> Grammar::step_draft(uint32_t k, int32_t token) {
  TERN_CHECK_OR_RETURN(program_ != nullptr && k + 1 < kMaxDraftSlots, Error::InvalidArgument, "draft slot %u", k);
  bool allowed = false;
  TERN_RETURN_IF_ERROR(token_step(drafts_[k], token, &drafts_[k + 1], &allowed));
  return allowed;
}

Error Grammar::commit_draft(uint32_t k) {
  TERN_CHECK_OR_RETURN(program_ != nullptr && k < kMaxDraftSlots, Error::InvalidArgument, "draft slot %u", k);
  if (k > 0) copy_state(drafts_[k], &current_);
  return compact();
}

namespace {

// The cache for a leaf: its position's, or in a loop's body with fewer rounds left than its
// longest accepted token, the one for that many (kTierRounds: that many or more).
const TokenCache& cache_for(const Program& g, uint32_t leaf) {
  const Node& n = g.nodes[leaf];
  const TokenCache& c = g.caches[n.pos];
  if (!g.rules[g.states[g.positions[n.pos].state].rule].loop_body || n.parent <= kMarkerNode ||
      g.nodes[n.parent].pos < g.n_positions) {
    return c;
  }
  const LoopFrame f = loop_frame(g, g.nodes[n.parent].pos);
  const LoopInfo& loop = g.loops[f.loop];
  if (loop.max == kUnboundedLoop || loop.max - f.count >= c.rounds_needed) return c;
  return g.tier_caches[c.tiers + std::min(loop.max - f.count, kTierRounds)];
}

// Walks the tokens of rank ranges against one stack, setting the bits of those it allows;
// tokens sharing a prefix share its steps, and a whole subtree is skipped where one dies.
class RangeWalk {
 public:
  RangeWalk(Program& g, const GrammarVocab& v, uint32_t* words) : g_(g), v_(v), words_(words) {}
  Error start(uint32_t leaf) { return walker_.start(g_, &leaf, 1, false); }
  Error walk(uint32_t r, uint32_t end) {
    while (r < end) {
      const uint32_t id = v_.sorted(r);
      if (bit_set(words_, id)) {
        ++r;
        continue;
      }
      const uint8_t* b = v_.rank_bytes(r);
      const uint32_t n = v_.rank_length(r);
      uint32_t shared = 0;
      const uint32_t limit = std::min(std::min(prev_len_, n), prev_depth_);
      while (shared < limit && prev_[shared] == b[shared]) ++shared;
      auto reached = walker_.descend(b, n, shared, nullptr);
      if (!reached.ok()) return reached.error();
      prev_ = b;
      prev_len_ = n;
      prev_depth_ = *reached;
      if (*reached == n) {
        const WalkLevel& last = walker_.level(n);
        if (last.count > 0 || last.accepting) set_bit(words_, id);
        ++r;
      } else {
        r = std::max(r + 1, std::min(end, v_.subtree_end(r, *reached)));  // they all die where it did
      }
    }
    return Error::Ok;
  }
  void finish() { walker_.finish(); }

 private:
  Program& g_;
  const GrammarVocab& v_;
  uint32_t* words_;
  Walker walker_;
  const uint8_t* prev_ = nullptr;
  uint32_t prev_len_ = 0, prev_depth_ = 0;
};

void add_accepted(const Program& g, const GrammarVocab& v, const TokenCache& c, uint32_t* words) {
  const uint32_t* data = g.cache_data + c.accepted;
  switch (c.encoding) {
    case Accepted::Bitset:
      for (uint32_t w = 0; w < g.mask_words; ++w) words[w] |= data[w];
      break;
    case Accepted::Ids:
      for (uint32_t k = 0; k < c.accepted_count; ++k) set_bit(words, data[k]);
      break;
    case Accepted::RankRanges:
      for (uint32_t k = 0; k < c.accepted_count; ++k) {
        for (uint32_t r = data[2 * k]; r < data[2 * k + 1]; ++r) set_bit(words, v.sorted(r));
      }
      break;
  }
}

// One leaf's tokens: its cache's accepted set and its uncertain tokens walked against the
// stack, or, without a cache, every token its first byte allows walked.
Error leaf_mask(Program& g, const GrammarVocab& v, uint32_t leaf, bool accepted_in, uint32_t* words) {
  const TokenCache& c = cache_for(g, leaf);
  const bool exact = c.walked != 0;
  if (!exact && !accepted_in) add_accepted(g, v, c, words);
  if (!exact && c.uncertain_count == 0) return Error::Ok;
  RangeWalk walk(g, v, words);
  TERN_RETURN_IF_ERROR(walk.start(leaf));
  Error e = Error::Ok;
  if (exact) {
    const uint16_t* row = g.dfa + static_cast<size_t>(g.positions[g.nodes[leaf].pos].dfa) * 256;
    for (uint32_t b = 0; b < 256 && e == Error::Ok; ++b) {
      if (row[b] != kDfaReject) e = walk.walk(v.first_rank(b), v.first_rank(b + 1));
    }
  } else {
    const uint32_t* ranges = g.cache_data + c.uncertain;
    for (uint32_t k = 0; k < c.uncertain_count && e == Error::Ok; ++k) e = walk.walk(ranges[2 * k], ranges[2 * k + 1]);
  }
  walk.finish();
  return e;
}

}  // namespace

Result<uint32_t> Grammar::compute_mask(const State& state, uint32_t* words) {
  Program& g = *program_;
  const GrammarVocab& v = *vocab_;
  std::memset(words, 0, g.mask_words * sizeof(uint32_t));
  for (uint32_t i = 0; i < state.count; ++i) {
    const uint32_t leaf = state.leaves[i];
    // The same cache on another stack (caches are per position: compared only there): its
    // accepted set is in already.
    const uint32_t pos = g.nodes[leaf].pos;
    const TokenCache* c = &cache_for(g, leaf);
    bool repeated = false;
    for (uint32_t j = 0; j < i && !repeated && !c->walked; ++j) {
      repeated = g.nodes[state.leaves[j]].pos == pos && &cache_for(g, state.leaves[j]) == c;
    }
    TERN_RETURN_IF_ERROR(leaf_mask(g, v, leaf, repeated, words));
  }
  if (state.accepting) {
    for (uint32_t i = 0; i < v.end_token_count(); ++i) set_bit(words, static_cast<uint32_t>(v.end_tokens()[i]));
  }
  uint32_t allowed = 0;
  for (uint32_t w = 0; w < g.mask_words; ++w) allowed += static_cast<uint32_t>(__builtin_popcount(words[w]));
  return allowed;
}

Result<uint32_t> Grammar::mask_logits(const State& state, float* logits) {
  TERN_CHECK_OR_RETURN(program_ != nullptr, Error::InvalidState, "no grammar is set");
  TERN_ASSIGN_OR_RETURN(const uint32_t allowed, compute_mask(state, mask_));
  const uint32_t n = vocab_->size();
  // Whole words at once where the mask is all off (most of a JSON step) or all on (inside a
  // string); bit by bit only where it is mixed. Whether anything allowed is still finite
  // (the bias and hook may have banned it) only needs one.
  bool finite = false;
  for (uint32_t w = 0; w < program_->mask_words; ++w) {
    const uint32_t bits = mask_[w];
    const uint32_t base = w * 32;
    const uint32_t count = std::min<uint32_t>(32, n - base);
    float* l = logits + base;
    if (bits == 0) {
      for (uint32_t k = 0; k < count; ++k) l[k] = -INFINITY;
    } else if (bits == 0xFFFFFFFFu && count == 32) {
      for (uint32_t k = 0; k < 32 && !finite; ++k) finite = l[k] > -INFINITY;
    } else {
      for (uint32_t k = 0; k < count; ++k) {
        if ((bits >> k) & 1u) {
          finite = finite || l[k] > -INFINITY;
        } else {
          l[k] = -INFINITY;
        }
      }
    }
  }
  return finite ? allowed : 0u;
}

}  // namespace tern
