// Grammar-constrained generation: a GBNF grammar compiled into a pushdown automaton over
// bytes, and the mask of the tokens it allows at each step.
//
// Compilation (Grammar::compile), into one memory region the caller owns (a session's
// grammar reservation), nothing allocated elsewhere:
//   1. GBNF text -> syntax tree; every rule body -> one NFA (Thompson construction: groups,
//      alternatives and repetitions stay inside their rule; small rules without references
//      are inlined); character classes and literals -> byte DFAs over UTF-8, so a character
//      split across tokens is just a mid-character DFA state.
//   2. Checks: undefined rules, a missing root, left recursion.
//   3. Per terminal position (an NFA state and its DFA state), the vocabulary sorted by bytes
//      is walked once from that position alone: tokens the rule consumes whole are accepted
//      whatever the stack below (context-independent), tokens that leave the rule with bytes
//      to spare are "uncertain" (kept unless the rest's first byte cannot follow the rule),
//      the rest rejected (XGrammar's adaptive token mask cache).
// At run time the state is a set of stacks sharing their tails (interned frames in a node
// pool). A step's mask is the union over the stacks' top positions of their accepted sets,
// plus the uncertain tokens that survive a walk against the real stack. Nothing is allocated
// per token; the pool is compacted in place when it fills.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "platform/error.h"
#include "runtime/base/arena.h"

namespace tern {

class Tokenizer;
namespace grammar_detail {
class Region;
}
namespace schema {
struct Tokenizer;
}

// The vocabulary as grammars see it: each token's bytes as generation emits them (control
// tokens have none and are never allowed, end tokens only where the grammar accepts), and
// the ids sorted by those bytes with each one's common prefix with the one before, so a
// walk over all tokens shares work between tokens with a common prefix. Built once per
// model (the model's arena, ArenaPurpose::Tokenizer) and shared by its sessions.
class GrammarVocab {
 public:
  // Arena bytes build() takes for a bundle's tokenizer table (0 without one).
  static size_t required_arena_bytes(const schema::Tokenizer* table);
  // `n_tokens`: the ids a session may sample (the tokenizer's, at most the model's rows).
  Error build(const Tokenizer& tokenizer, uint32_t n_tokens, ArenaAllocator& arena);
  // From token byte strings (tests, fuzzing): token i is text[offsets[i], offsets[i + 1]);
  // both arrays must outlive the vocabulary.
  Error build(const uint8_t* text, const uint32_t* offsets, uint32_t n_tokens, const int32_t* end_tokens,
              uint32_t n_end_tokens, ArenaAllocator& arena);

  uint32_t size() const { return n_tokens_; }
  const uint8_t* bytes(uint32_t id) const { return bytes_ + offsets_[id]; }
  uint32_t length(uint32_t id) const { return offsets_[id + 1] - offsets_[id]; }
  // Tokens with bytes, sorted; sorted_size() of them. Walks read them by rank: the bytes are
  // also kept in that order, so a walk reads memory front to back.
  uint32_t sorted_size() const { return n_sorted_; }
  uint32_t sorted(uint32_t rank) const { return sorted_[rank]; }
  const uint8_t* rank_bytes(uint32_t rank) const { return rank_bytes_ + rank_offsets_[rank]; }
  uint32_t rank_length(uint32_t rank) const { return rank_offsets_[rank + 1] - rank_offsets_[rank]; }
  // Common prefix of ranks r - 1 and r (at most 255; 0 at rank 0).
  uint32_t lcp(uint32_t rank) const { return lcp_[rank]; }
  // The first rank after `rank` whose common prefix with its predecessor is below `depth`:
  // the end of the run of tokens sharing rank's first `depth` bytes.
  uint32_t subtree_end(uint32_t rank, uint32_t depth) const;
  uint32_t max_length() const { return max_length_; }
  // The ranks of the tokens whose first byte is b: [first_rank(b), first_rank(b + 1)).
  uint32_t first_rank(uint32_t b) const { return first_rank_[b]; }
  // Ids that end generation (EOS, end of turn): allowed exactly where the grammar accepts.
  const int32_t* end_tokens() const { return end_tokens_; }
  uint32_t end_token_count() const { return n_end_tokens_; }
  bool built() const { return n_tokens_ > 0; }

 private:
  static constexpr uint32_t kLcpBlock = 64;
  uint32_t n_tokens_ = 0;
  uint32_t n_sorted_ = 0;
  uint32_t max_length_ = 0;
  const uint8_t* bytes_ = nullptr;
  const uint32_t* offsets_ = nullptr;  // n_tokens_ + 1
  uint32_t* sorted_ = nullptr;
  uint8_t* rank_bytes_ = nullptr;
  uint32_t* rank_offsets_ = nullptr;  // n_sorted_ + 1
  uint8_t* lcp_ = nullptr;
  uint8_t* lcp_block_min_ = nullptr;  // the least lcp in each block of kLcpBlock ranks
  uint32_t first_rank_[257] = {};
  int32_t end_tokens_[4] = {-1, -1, -1, -1};
  uint32_t n_end_tokens_ = 0;
};

class Grammar {
 public:
  // The parse state at one point: stacks (their top frames) and whether the text so far is
  // a complete sentence of the grammar.
  struct State {
    uint32_t* leaves = nullptr;
    uint32_t count = 0;
    uint32_t capacity = 0;
    bool accepting = false;
  };

  // Compiles `text` (GBNF, root rule "root") for `vocab` into [region, region + bytes).
  // InvalidGrammar (line and column, or the rule at fault), InvalidUtf8, GrammarTooLarge
  // (the bytes it needs, when it can tell), Aborted when `abort` (may be null) turns non-zero
  // (checked between positions' vocabulary walks). On failure the grammar is empty.
  Error compile(const char* text, size_t size, const GrammarVocab& vocab, void* region, size_t bytes,
                const std::atomic<int>* abort = nullptr);
  // Copies `other`'s compiled grammar (over the same vocabulary) into [region, region + bytes)
  // with working memory of its own: what compile() of its text makes, without the walks.
  // GrammarTooLarge when it does not fit. Only `other`'s compiled part is read (nothing
  // changes it once compiled), so `other` may be matching on another thread meanwhile.
  Error copy_from(const Grammar& other, void* region, size_t bytes);
  void clear();
  bool compiled() const { return program_ != nullptr; }
  // Whether the grammar was copied from another (copy_from) rather than compiled.
  bool copied() const { return copied_; }
  // Whether the compiled grammar is of exactly this text (compared byte by byte).
  bool compiled_from(const char* text, size_t size) const;
  // Region bytes the compiled grammar and its working memory use.
  size_t used_bytes() const { return used_bytes_; }
  uint32_t rule_count() const;
  uint32_t position_count() const;

  // The current state: the start (restart), then after each accepted token.
  void restart();
  const State& state() const { return current_; }
  bool accepting() const { return current_.accepting; }
  // No token but an end token can follow (the sentence is complete and cannot go on).
  bool finished() const { return current_.accepting && current_.count == 0; }
  // Advances the current state by a token's bytes (end tokens: nothing). InvalidArgument when
  // the grammar does not allow it (the state is unchanged).
  Error accept_token(int32_t token);
  // ... by raw bytes (tests, tools); false when rejected (the state is unchanged).
  Result<bool> accept_bytes(const uint8_t* bytes, size_t size);

  // Snapshots for speculative decoding: slot k holds the state after k drafts. Slot 0 is a
  // copy of the current state; step_draft(k, token) fills slot k + 1 from slot k (false when
  // the token is not allowed there); commit_draft(k) makes slot k current. Up to
  // kMaxDraftSlots - 1 drafts.
  static constexpr uint32_t kMaxDraftSlots = 16;
  void begin_drafts();
  Result<bool> step_draft(uint32_t k, int32_t token);
  Error commit_draft(uint32_t k);
  const State& draft_state(uint32_t k) const { return drafts_[k]; }

  // The tokens allowed after `state`, as a bitset over the vocabulary's ids (32 per word);
  // returns how many.
  Result<uint32_t> compute_mask(const State& state, uint32_t* words);
  uint32_t mask_words() const { return (vocab_->size() + 31) / 32; }
  // compute_mask(state) into the grammar's own bitset, then every logit of a token it does
  // not allow (ids < vocab size) becomes -infinity. Returns how many tokens it allows, or 0
  // when none of them has a finite logit left (nothing to sample).
  Result<uint32_t> mask_logits(const State& state, float* logits);

  // Brute force, for tests: whether `state` allows the bytes (a walk over the automaton
  // alone, without the caches).
  Result<bool> allows_bytes(const State& state, const uint8_t* bytes, size_t size);
  const GrammarVocab& vocab() const { return *vocab_; }

  struct Program;

 private:
  // The working memory after the compiled part (grammar_memory.cpp); GrammarTooLarge when
  // it does not fit.
  Error carve_working_memory(Program& program, const GrammarVocab& vocab, grammar_detail::Region& r,
                             uint32_t** mask_out);
  Error start_state();
  Error advance(const State& in, uint8_t byte, State* out);
  Error token_step(const State& in, int32_t token, State* out, bool* allowed);
  // Drops the frames no stack of the current state (or of `also`) uses, once the pool is half full.
  Error compact(State* also = nullptr);

  Program* program_ = nullptr;
  const GrammarVocab* vocab_ = nullptr;
  size_t used_bytes_ = 0;
  const uint8_t* region_ = nullptr;  // the compiled part is [region_, region_ + compiled_bytes_)
  size_t compiled_bytes_ = 0;
  bool copied_ = false;
  State current_;
  State scratch_[2];
  State staged_;
  State drafts_[kMaxDraftSlots];
  uint32_t* mask_ = nullptr;
};

}  // namespace tern
