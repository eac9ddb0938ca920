// What the tokenizer's source files share: token attributes, size limits, the private parts of
// Tokenizer (specials, arena layout, encode scratch) and the output helpers. Internal to the runtime.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/base/arena.h"
#include "runtime/text/symbol_merge.h"
#include "runtime/text/tokenizer.h"
#include "schema/tokenizer_generated.h"

namespace tern {
namespace tokenizer_detail {

inline constexpr uint8_t kAttrNormal = static_cast<uint8_t>(schema::TokenAttr::Normal);
inline constexpr uint8_t kAttrControl = static_cast<uint8_t>(schema::TokenAttr::Control);
inline constexpr uint8_t kAttrByte = static_cast<uint8_t>(schema::TokenAttr::Byte);
inline constexpr uint8_t kAttrUnknown = static_cast<uint8_t>(schema::TokenAttr::Unknown);
inline constexpr uint8_t kAttrUserDefined = static_cast<uint8_t>(schema::TokenAttr::UserDefined);
inline constexpr uint8_t kAttrUnused = static_cast<uint8_t>(schema::TokenAttr::Unused);

inline constexpr uint8_t kSpaceMark[3] = {0xE2, 0x96, 0x81};    // U+2581, SentencePiece's space
inline constexpr uint8_t kReplacement[3] = {0xEF, 0xBF, 0xBD};  // U+FFFD
// Longest piece accepted; lets the decoder and the merge builder work in stack buffers.
inline constexpr size_t kMaxPieceBytes = 1024;
inline constexpr size_t kMaxUnknownSurface = 64;

// Scratch cost per byte of a run: the run itself (after U+FFFD replacement), one symbol
// (12 or 16 bytes) and up to three queued pairs of 16 bytes (one per initial pair, two
// per merge).
inline constexpr size_t kScratchPerByte = 1 + 16 + 3 * 16;
inline constexpr size_t kScratchSlack = 256;

inline void emit(int32_t id, int32_t* out, size_t capacity, size_t* count) {
  if (*count < capacity) out[*count] = id;
  ++*count;
}

// Appends the UTF-8 character at `text` (U+FFFD in place of an invalid sequence) to out at
// *size; returns how many bytes of `text` it took.
size_t append_char_or_replacement(const uint8_t* text, size_t avail, uint8_t* out, size_t* size);

}  // namespace tokenizer_detail

struct Tokenizer::Special {
  int32_t id;
  uint32_t offset;
  uint32_t size;
  bool always;  // user-defined pieces are matched even without parse_special
};

struct Tokenizer::Layout {
  uint32_t vocab = 0;
  uint32_t piece_capacity = 0;
  uint32_t merge_capacity = 0;
  uint32_t specials = 0;
  size_t scratch_bytes = 0;
  size_t total = 0;
};

// A run's working memory carved out of one buffer.
class Tokenizer::Scratch {
 public:
  Scratch(uint8_t* base, size_t bytes) : base_(base), bytes_(bytes) {}
  // Room for a run of `run_bytes` bytes (after U+FFFD replacement)?
  bool fits(size_t run_bytes) const { return required(run_bytes) <= bytes_; }
  static size_t required(size_t run_bytes) {
    return run_bytes * tokenizer_detail::kScratchPerByte + tokenizer_detail::kScratchSlack;
  }
  uint8_t* run_buffer() const { return base_; }
  // Symbols and queue for a run of n bytes, placed after the run buffer.
  template <typename Symbol>
  Symbol* symbols(size_t n) const {
    return reinterpret_cast<Symbol*>(base_ + align_up(n, 16));
  }
  tokenizer_detail::QueuedPair* queue(size_t n) const {
    return reinterpret_cast<tokenizer_detail::QueuedPair*>(base_ + align_up(n, 16) + align_up(n * 16, 16));
  }
  bool prev_unknown = false;  // SentencePiece merges runs of unknown pieces into one <unk>
  size_t bytes() const { return bytes_; }
  // The last `n` bytes (16-aligned) for the rest of this call; null when they do not fit.
  uint8_t* take_tail(size_t n) {
    const size_t aligned = align_up(n, 16);
    if (aligned + 16 > bytes_) return nullptr;
    bytes_ = (bytes_ - aligned) / 16 * 16;
    return base_ + bytes_;
  }
  // Unigram: the best path's score where the previous word ended. libsentencepiece runs one
  // Viterbi over the whole text in float; carrying the score makes each word's comparisons
  // round exactly as they do there.
  float unigram_score = 0;

 private:
  uint8_t* base_;
  size_t bytes_;
};

}  // namespace tern
