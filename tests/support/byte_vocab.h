// A vocabulary of the 256 single bytes plus an end token (id 256, no bytes): grammars checked
// byte by byte, with no tokenizer in between (tern-grammar-check, the structured unit tests).
#pragma once

#include <cstdint>
#include <vector>

#include "platform/error.h"
#include "runtime/base/arena.h"
#include "runtime/structured/grammar.h"

namespace tern::testing {

class ByteVocab {
 public:
  static constexpr int32_t kEndToken = 256;
  ByteVocab() = default;
  ByteVocab(const ByteVocab&) = delete;  // the vocabulary points into memory_
  ByteVocab& operator=(const ByteVocab&) = delete;

  // Builds the vocabulary in memory of its own; the error (with last_error_message) if it fails.
  Error build() {
    std::vector<uint8_t> bytes(256);
    std::vector<uint32_t> offsets(258);
    for (uint32_t b = 0; b < 256; ++b) {
      bytes[b] = static_cast<uint8_t>(b);
      offsets[b] = b;
    }
    offsets[256] = offsets[257] = 256;  // the end token: no bytes
    return vocab_.build(bytes.data(), offsets.data(), 257, &kEndToken, 1, arena_);
  }
  const GrammarVocab& vocab() const { return vocab_; }

 private:
  std::vector<uint8_t> memory_ = std::vector<uint8_t>(1 << 20);
  ArenaAllocator arena_{memory_.data(), memory_.size()};
  GrammarVocab vocab_;
};

}  // namespace tern::testing
