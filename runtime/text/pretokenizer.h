// The regex-free pre-tokenizers of byte-level BPE: LLaMA-3's split pattern (and Qwen2's, the
// same with single digits), matched one pre-token at a time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/text/unicode.h"

namespace tern {

// The LLaMA-3 pre-tokenizer: end of the pre-token starting at byte `pos` (< len) of
// `text`, matching the Hugging Face split regex
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//   \s*[\r\n]+|\s+(?!\S)|\s+
// with an invalid UTF-8 byte counting as one U+FFFD character. Qwen2's (Qwen3's) regex is
// the same with \p{N} for \p{N}{1,3}: max_digits 1.
size_t llama3_pretoken_end(const uint8_t* text, size_t len, size_t pos, uint32_t max_digits = 3);

// The LLaMA-3 pre-tokenizer, one match at a time:
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Alternatives are tried in order at `pos`, as a backtracking regex engine does. Qwen2's
// pattern has \p{N} where LLaMA-3's has \p{N}{1,3}: max_digits 1.
class Llama3Splitter {
 public:
  Llama3Splitter(const uint8_t* s, size_t len, uint32_t max_digits = 3) : s_(s), len_(len), max_digits_(max_digits) {}

  // End of the pre-token starting at `pos` (< len).
  size_t next(size_t pos) const;

 private:
  unicode::Decoded at(size_t pos) const { return unicode::decode_utf8(s_ + pos, len_ - pos); }
  size_t skip_class(size_t pos, uint8_t cls) const;
  size_t contraction_end(size_t after) const;
  size_t whitespace_end(size_t pos) const;

  const uint8_t* s_;
  size_t len_;
  uint32_t max_digits_;
};

}  // namespace tern
