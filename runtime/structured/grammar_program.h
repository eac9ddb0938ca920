// The compiled form of a grammar and its working memory, shared by the compiler
// (grammar_compile.cpp) and the matcher (grammar.cpp). Internal to the runtime.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/structured/grammar.h"

namespace tern::grammar_detail {

// One state of a rule's NFA. Terminal states read one character through a byte DFA (arg:
// its first DFA state, next2: how many states it has); Ref states call rule `arg` and go on
// at `next` (tail: nothing can follow in this rule, so the call needs no return frame);
// Split states continue at next and next2 without reading; Final ends the rule. Count states
// run a counted repetition (`x{a,b}` with large counts): loop `arg` calls its body rule again
// and again with the count in the return frame, then goes on at `next`.
enum class NfaKind : uint8_t { Terminal, Ref, Split, Final, Count };
struct NfaState {
  NfaKind kind;
  uint8_t tail;
  uint8_t walked;  // Terminal: no token cache; its tokens are walked against the stack each time
  uint8_t unused;
  uint32_t arg;
  uint32_t next;
  uint32_t next2;
  uint32_t rule;  // the compiled rule the state belongs to
  uint32_t pos;   // its first position
};

// DFA tables: 256 entries per state, the next state's global index or one of these.
inline constexpr uint16_t kDfaAccept = 0xFFFF;  // a character is complete
inline constexpr uint16_t kDfaReject = 0xFFFE;
inline constexpr uint32_t kMaxDfaStates = 0xFFF0;

// A place the parser can be: an NFA state and, for terminals, the DFA state within the
// character being read. Stack frames and caches are indexed by position.
struct Position {
  uint32_t state;
  uint16_t dfa;
  uint16_t terminal;
};

struct RuleInfo {
  uint32_t start;
  uint32_t name_offset;  // into Program::names
  uint32_t name_size;
  uint32_t nullable;
  // Bytes that can follow the rule anywhere (256-bit set); for a loop's body, the bytes that
  // can follow the loop (its own first bytes, when it goes round again, aside).
  uint32_t follow[8];
  uint32_t loop_body;  // 1: the body of counted repetitions (its return frames are counts)
  uint32_t probes;     // a body's first probe loop (below), or 0
};

// A counted repetition: `body` (a rule that reads at least one byte) at least `min` and at
// most `max` times (kUnboundedLoop: no most), then the Count state's `next`. The count lives
// in the return frame: its position is virtual, n_positions + base + count - 1, for counts
// 1..cap (cap: max, or min when there is no most, as more rounds change nothing).
// Each body also has kTierRounds + 1 probe loops, which only the token caches walk from: with
// r = 0 .. kTierRounds - 1 rounds left, and with rounds without end; their exit is the body's
// end (where a cache's walk stops being sure).
inline constexpr uint32_t kTierRounds = 16;
inline constexpr uint32_t kUnboundedLoop = 0xFFFFFFFFu;
struct LoopInfo {
  uint32_t body;
  uint32_t min;
  uint32_t max;
  uint32_t cap;
  uint32_t next;  // the state after the loop
  uint32_t base;
};

// The tokens a terminal position allows on its own (`accepted`, in the smallest of three
// encodings: token ids, a bitset of Program::mask_words words, or [begin, end) pairs of ranks
// in the sorted vocabulary, which is what whole subtrees of tokens make), and the `uncertain`
// ones to check against the real stack ([begin, end) rank pairs, ascending).
enum class Accepted : uint32_t { Ids, Bitset, RankRanges };
struct TokenCache {
  uint32_t accepted = 0;
  uint32_t accepted_count = 0;  // ids, or range pairs
  uint32_t uncertain = 0;
  uint32_t uncertain_count = 0;  // range pairs
  Accepted encoding = Accepted::Ids;
  // In a loop's body this is the cache for a loop with at least `rounds_needed` rounds left
  // (the longest accepted token); `tiers` indexes kTierRounds + 1 more in
  // Program::tier_caches: for r < kTierRounds rounds left, then for kTierRounds or more (no
  // accepted token longer, the longer ones uncertain).
  uint32_t rounds_needed = 0;
  uint32_t tiers = 0;
  // No cache (a position of a folded alternation of literals, where few tokens go far): every
  // token its first byte allows is walked against the stack.
  uint32_t walked = 0;
};

// A stack frame: a position and the frame below. Frames are interned (one node per pair),
// so equal stacks are the same node and a parent's index is always below its child's.
struct Node {
  uint32_t pos;
  uint32_t parent;
  uint32_t stamp;  // the step that last made it a leaf
  uint32_t slot;   // its entry in the interning table
};

// A place expansion went through in the current step: (position, parent) pairs are visited
// once per step (epsilon cycles, shared sub-expansions) without making nodes for them.
struct Visit {
  uint32_t pos;
  uint32_t parent;
  uint32_t stamp;
};
inline constexpr uint32_t kRootNode = 0;    // below the outermost rule: the text may end
inline constexpr uint32_t kMarkerNode = 1;  // below a cache's position: "the rest of the stack"
inline constexpr uint32_t kNoPos = 0xFFFFFFFFu;

// One depth of a walk over tokens: the leaves after that many bytes (in the walk buffer).
struct WalkLevel {
  uint32_t begin;
  uint32_t count;
  uint32_t node_top;         // the pool's top when the level was made
  uint8_t accepting;         // a pop reached the root: the text may end here
  uint8_t can_end;           // a pop reached the marker: the position's rule may end here
  uint8_t uncertain_before;  // the rule could end before a byte that may follow it
  uint8_t unused;
};

}  // namespace tern::grammar_detail

namespace tern {

struct Grammar::Program {
  // Compiled.
  const grammar_detail::NfaState* states = nullptr;
  uint32_t n_states = 0;
  const grammar_detail::Position* positions = nullptr;
  uint32_t n_positions = 0;
  const uint16_t* dfa = nullptr;  // n_dfa * 256
  uint32_t n_dfa = 0;
  const grammar_detail::RuleInfo* rules = nullptr;
  uint32_t n_rules = 0;
  uint32_t root = 0;
  const char* names = nullptr;
  const char* source = nullptr;  // the grammar's text, to tell it again exactly
  size_t source_size = 0;
  const grammar_detail::LoopInfo* loops = nullptr;
  uint32_t n_loops = 0;
  grammar_detail::TokenCache* caches = nullptr;  // per position
  grammar_detail::TokenCache* tier_caches = nullptr;
  const uint32_t* cache_data = nullptr;

  // Working memory.
  grammar_detail::Node* nodes = nullptr;
  uint32_t node_capacity = 0;
  uint32_t node_top = 0;
  // Interning: node index + 1, 0 empty; twice the nodes, so at most half full. Nodes are
  // dropped newest first (a walk backing up), which undoes their insertions exactly.
  uint32_t* table = nullptr;
  uint32_t table_mask = 0;
  grammar_detail::Visit* visits = nullptr;  // this step's expansion marks
  uint32_t visit_mask = 0;
  uint32_t* worklist = nullptr;    // (position, parent) pairs
  uint32_t worklist_capacity = 0;  // pairs
  uint32_t stamp = 0;
  uint32_t* walk = nullptr;  // leaves of the walk levels
  uint32_t walk_capacity = 0;
  grammar_detail::WalkLevel* levels = nullptr;  // max token length + 1
  uint32_t max_leaves = 0;
  uint32_t mask_words = 0;
};

namespace grammar_detail {

using Program = Grammar::Program;

// The matcher's primitives, used by the compiler to build the caches.
// Starts a new step (expansion marks).
void new_step(Program& g);
// Interns (pos, parent); UINT32_MAX when the pool is full.
uint32_t intern(Program& g, uint32_t pos, uint32_t parent);
// Drops the nodes from index `top` on (newest first), with their table entries.
void truncate(Program& g, uint32_t top);
// Expands `node` (a frame to resume) and everything it reaches without reading, appending
// terminal leaves to out[*count...capacity) and setting *accepting / *can_end on pops to the
// root / marker. GrammarTooLarge when the pool, the worklist or `out` overflow.
Error expand(Program& g, uint32_t node, uint32_t* out, uint32_t* count, uint32_t capacity, uint8_t* accepting,
             uint8_t* can_end);
// One byte from the leaves in[0, n): the new leaves and flags, as expand.
Error step(Program& g, const uint32_t* in, uint32_t n, uint8_t byte, uint32_t* out, uint32_t* count, uint32_t capacity,
           uint8_t* accepting, uint8_t* can_end);

// A walk over tokens from one set of leaves (levels[0]), one byte per level.
class Walker {
 public:
  // levels[0] := the leaves `leaves[0, n)` with `accepting`.
  Error start(Program& g, const uint32_t* leaves, uint32_t n, bool accepting);
  // Makes levels[shared .. len] hold the states after bytes[0..d) (levels up to `shared` are
  // kept from the last token, which had the same first `shared` bytes), stopping at the
  // first level without leaves. Returns the deepest level made. `follow` (may be null): the
  // bytes that can follow the start position's rule, for uncertain_before.
  Result<uint32_t> descend(const uint8_t* bytes, uint32_t len, uint32_t shared, const uint32_t* follow);
  const WalkLevel& level(uint32_t d) const { return g_->levels[d]; }
  // Drops every node made since start().
  void finish();

 private:
  Program* g_ = nullptr;
  uint32_t node_top0_ = 0;
};

// The loop and count of a virtual position (pos >= n_positions: a loop's return frame).
struct LoopFrame {
  uint32_t loop;
  uint32_t count;
};
LoopFrame loop_frame(const Program& g, uint32_t pos);

inline bool bit_set(const uint32_t* bits, uint32_t i) { return (bits[i >> 5] >> (i & 31)) & 1u; }
inline void set_bit(uint32_t* bits, uint32_t i) { bits[i >> 5] |= 1u << (i & 31); }

}  // namespace grammar_detail
}  // namespace tern
