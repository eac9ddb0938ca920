// A small vocabulary for the grammar fuzzers: every single byte (so any sentence can be
// spelled), some multi-byte tokens that cross symbols and UTF-8 characters, and an end token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/base/arena.h"
#include "runtime/structured/grammar.h"

namespace tern::fuzz {

class FuzzVocab {
 public:
  FuzzVocab() : arena_memory_(1 << 20), arena_(arena_memory_.data(), arena_memory_.size()) {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
    for (const char* t : {"{\"", "\":", "\",",  "\"}", " \"",  "true", "false", "null", "ab", "abc", "12",
                          "3.5", ", ",  "\n  ", "é",   "\xC3", "東京", "\\u00", "\"\n", "]}", "[[",  "-0"}) {
      tokens.push_back(t);
    }
    end_ = static_cast<int32_t>(tokens.size());
    tokens.push_back("");
    for (const std::string& t : tokens) {
      offsets_.push_back(static_cast<uint32_t>(bytes_.size()));
      bytes_.insert(bytes_.end(), t.begin(), t.end());
    }
    offsets_.push_back(static_cast<uint32_t>(bytes_.size()));
    ok_ = vocab_.build(bytes_.data(), offsets_.data(), static_cast<uint32_t>(tokens.size()), &end_, 1, arena_) ==
          Error::Ok;
  }
  bool ok() const { return ok_; }
  const GrammarVocab& vocab() const { return vocab_; }
  int32_t end() const { return end_; }

 private:
  std::vector<uint8_t> arena_memory_;
  ArenaAllocator arena_;
  std::vector<uint8_t> bytes_;
  std::vector<uint32_t> offsets_;
  GrammarVocab vocab_;
  int32_t end_ = -1;
  bool ok_ = false;
};

// A short walk from the start: at each step the mask must equal the brute force (each token's
// bytes through the automaton); then an allowed token picked by `choice` is accepted.
// Aborts on a mismatch (a wrong mask is a bug whatever the grammar).
inline void walk_and_check(Grammar& g, const FuzzVocab& v, const uint8_t* choice, size_t n_choice) {
  std::vector<uint32_t> mask(g.mask_words());
  for (size_t step = 0; step < 8; ++step) {
    auto count = g.compute_mask(g.state(), mask.data());
    if (!count.ok()) return;  // e.g. an ambiguous grammar outgrew its stacks: refused, fine
    std::vector<int32_t> allowed;
    for (uint32_t id = 0; id < v.vocab().size(); ++id) {
      bool expect;
      if (static_cast<int32_t>(id) == v.end()) {
        expect = g.state().accepting;
      } else {
        auto r = g.allows_bytes(g.state(), v.vocab().bytes(id), v.vocab().length(id));
        if (!r.ok()) return;
        expect = *r;
      }
      const bool got = (mask[id / 32] >> (id % 32)) & 1u;
      if (got != expect) __builtin_trap();
      if (got && static_cast<int32_t>(id) != v.end()) allowed.push_back(static_cast<int32_t>(id));
    }
    if (allowed.empty()) return;
    const uint8_t c = n_choice > 0 ? choice[step % n_choice] : 0;
    if (g.accept_token(allowed[(c * 2654435761u >> 8) % allowed.size()]) != Error::Ok) return;
  }
}

}  // namespace tern::fuzz
