// An alternation of literals as a trie of byte states: at most one branch per next byte, so
// an enum of 10,000 values is as many parse stacks as the bytes that may come next.
#pragma once

#include <cstdint>

#include "platform/error.h"
#include "runtime/structured/region.h"

namespace tern::grammar_detail {

// The literals: literal i is bytes[begin[i], begin[i] + length[i]); equal ones count once, an
// empty one matches nothing at all.
struct Literals {
  uint8_t* bytes = nullptr;
  uint32_t* begin = nullptr;
  uint32_t* length = nullptr;
  uint32_t count = 0;
};

// The automaton the trie is written into.
class TrieStates {
 public:
  virtual ~TrieStates() = default;
  // A state reading `b`, then going on at `next`.
  virtual Result<uint32_t> byte(uint8_t b, uint32_t next) = 0;
  // A state going on at `first` and at `second` without reading.
  virtual Result<uint32_t> either(uint32_t first, uint32_t second) = 0;
  // Makes the byte state `from` go on at `to`.
  virtual void go_on(uint32_t from, uint32_t to) = 0;
};

// Writes the trie of `set` whose every literal goes on at `next`; returns its first state.
// Temporaries come from the region's high end (the caller releases them).
Result<uint32_t> build_literal_trie(const Literals& set, uint32_t next, Region& region, TrieStates& out);

}  // namespace tern::grammar_detail
