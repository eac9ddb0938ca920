// The LLaMA-3 / Qwen2 pre-tokenizer: the split regex's alternatives tried in order, without a regex engine.
#include "runtime/text/pretokenizer.h"

namespace tern {
namespace {

bool is_ascii_ci(uint32_t cp, char lower) {
  return cp == static_cast<uint32_t>(lower) || cp == static_cast<uint32_t>(lower - 32);
}

}  // namespace

size_t Llama3Splitter::next(size_t pos) const {
  const unicode::Decoded c = at(pos);
  const uint8_t cls = unicode::classify(c.cp);
  const size_t after = pos + c.length;
  // 1. contractions, case-insensitive.
  if (c.cp == '\'' && after < len_) {
    const size_t end = contraction_end(after);
    if (end != 0) return end;
  }
  // 2. [^\r\n\p{L}\p{N}]?\p{L}+
  if (cls & unicode::kLetter) return skip_class(after, unicode::kLetter);
  if (c.cp != '\r' && c.cp != '\n' && !(cls & unicode::kNumber) && after < len_ &&
      (unicode::classify(at(after).cp) & unicode::kLetter)) {
    return skip_class(after, unicode::kLetter);
  }
  // 3. \p{N}{1,3}
  if (cls & unicode::kNumber) {
    size_t end = after;
    for (uint32_t i = 1; i < max_digits_ && end < len_; ++i) {
      const unicode::Decoded d = at(end);
      if (!(unicode::classify(d.cp) & unicode::kNumber)) break;
      end += d.length;
    }
    return end;
  }
  // 4. ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  {
    size_t start = c.cp == ' ' ? after : pos;
    if (start < len_ &&
        !(unicode::classify(at(start).cp) & (unicode::kWhitespace | unicode::kLetter | unicode::kNumber))) {
      size_t end = start;
      while (end < len_) {
        const unicode::Decoded d = at(end);
        if (unicode::classify(d.cp) & (unicode::kWhitespace | unicode::kLetter | unicode::kNumber)) break;
        end += d.length;
      }
      while (end < len_ && (s_[end] == '\r' || s_[end] == '\n')) ++end;
      return end;
    }
  }
  if (cls & unicode::kWhitespace) return whitespace_end(pos);
  return after;  // unreachable: every character matches one of the alternatives
}

// 1. (?i:'s|'t|'re|'ve|'m|'ll|'d) after the apostrophe that ends at `after` (< len): the
// contraction's end, or 0 when none matches.
size_t Llama3Splitter::contraction_end(size_t after) const {
  const unicode::Decoded c1 = at(after);
  const size_t after1 = after + c1.length;
  if (is_ascii_ci(c1.cp, 's') || c1.cp == 0x17F /* long s folds to s */ || is_ascii_ci(c1.cp, 't') ||
      is_ascii_ci(c1.cp, 'm') || is_ascii_ci(c1.cp, 'd')) {
    return after1;
  }
  if (after1 < len_) {
    const uint32_t c2 = at(after1).cp;
    if ((is_ascii_ci(c1.cp, 'r') && is_ascii_ci(c2, 'e')) || (is_ascii_ci(c1.cp, 'v') && is_ascii_ci(c2, 'e')) ||
        (is_ascii_ci(c1.cp, 'l') && is_ascii_ci(c2, 'l'))) {
      return after1 + 1;
    }
  }
  return 0;
}

// Alternatives 5 to 7 for the whitespace character at `pos`.
size_t Llama3Splitter::whitespace_end(size_t pos) const {
  // The whitespace run [pos, end), its last \r or \n, and where its last character starts.
  size_t end = pos, last_newline = SIZE_MAX, last_start = pos;
  while (end < len_) {
    const unicode::Decoded d = at(end);
    if (!(unicode::classify(d.cp) & unicode::kWhitespace)) break;
    if (d.cp == '\r' || d.cp == '\n') last_newline = end;
    last_start = end;
    end += d.length;
  }
  // 5. \s*[\r\n]+ : backtracks to the last newline of the run.
  if (last_newline != SIZE_MAX) return last_newline + 1;
  // 6. \s+(?!\S) : the whole run at the end of text, else all but its last character.
  if (end == len_) return end;
  if (last_start > pos) return last_start;
  // 7. \s+
  return end;
}

size_t Llama3Splitter::skip_class(size_t pos, uint8_t cls) const {
  while (pos < len_) {
    const unicode::Decoded d = at(pos);
    if (!(unicode::classify(d.cp) & cls)) break;
    pos += d.length;
  }
  return pos;
}

size_t llama3_pretoken_end(const uint8_t* text, size_t len, size_t pos, uint32_t max_digits) {
  return Llama3Splitter(text, len, max_digits).next(pos);
}

}  // namespace tern
