// SentencePiece encoding: the normalizer and word cuts, BPE by piece score, BPE by merge rank
// (Gemma's tokenizer.json), and the output of each piece (byte fallback, <unk>).
#include <algorithm>
#include <cstring>

#include "runtime/text/symbol_merge.h"
#include "runtime/text/tokenizer.h"
#include "runtime/text/tokenizer_internal.h"
#include "runtime/text/unicode.h"

namespace tern {
using namespace tokenizer_detail;

namespace {

struct SpmSymbol {
  int32_t prev, next;
  uint32_t start, size;  // size 0: merged into its left neighbour
};

// remove_extra_whitespaces at the fragment's ends: leading spaces go; so does the trailing
// run of spaces and U+2581 (SentencePiece strips it from the normalized text, where the two
// look the same).
void trim_extra_spaces(const uint8_t* text, size_t* pos, size_t* len) {
  while (*pos < *len && text[*pos] == ' ') ++*pos;
  for (;;) {
    if (*len > *pos && text[*len - 1] == ' ') {
      --*len;
    } else if (*len >= *pos + 3 && std::memcmp(text + *len - 3, kSpaceMark, 3) == 0) {
      *len -= 3;
    } else {
      break;
    }
  }
}

}  // namespace

Error Tokenizer::encode_spm_fragment(const uint8_t* text, size_t len, bool first_fragment, Scratch& scratch,
                                     int32_t* out, size_t capacity, size_t* count) const {
  // Normalization as SentencePiece's identity normalizer: optional removal of extra
  // spaces, the dummy-prefix mark, ' ' -> U+2581, invalid bytes -> U+FFFD. The
  // normalized text is cut into words before each space mark that follows another
  // character, and each word goes through BPE on its own (see spm_split_words_).
  size_t pos = 0;
  if (remove_extra_whitespaces_) {
    trim_extra_spaces(text, &pos, &len);
    if (pos == len) return Error::Ok;
  }
  scratch.prev_unknown = false;
  scratch.unigram_score = 0;
  bool dummy = first_fragment && add_dummy_prefix_;
  // Two passes per word: measure, then fill the buffer.
  while (pos < len || dummy) {
    size_t word_end = pos;
    const size_t word_bytes = measure_spm_word(text, len, dummy, &pos, &word_end, scratch, out, capacity, count);
    if (word_bytes == 0) break;
    TERN_CHECK_OR_RETURN(scratch.fits(word_bytes), Error::BudgetTooSmall,
                         "a %zu-byte word needs %zu bytes of tokenizer scratch, have less", word_bytes,
                         Scratch::required(word_bytes));
    uint8_t* buf = scratch.run_buffer();
    const size_t n = copy_spm_word(text, pos, word_end, len, dummy, buf);
    dummy = false;
    if (kind_ == TokenizerKind::SentencePieceUnigram) {
      TERN_RETURN_IF_ERROR(unigram_word(buf, n, scratch, out, capacity, count));
    } else if (spm_ranked_) {
      TERN_RETURN_IF_ERROR(spm_ranked_word(buf, n, scratch, out, capacity, count));
    } else {
      TERN_RETURN_IF_ERROR(spm_word(buf, n, scratch, out, capacity, count));
    }
    pos = word_end;
  }
  return Error::Ok;
}

size_t Tokenizer::measure_spm_word(const uint8_t* text, size_t len, bool dummy, size_t* pos, size_t* word_end,
                                   Scratch& scratch, int32_t* out, size_t capacity, size_t* count) const {
  size_t word_bytes = dummy ? 3 : 0;
  bool prev_mark = dummy;
  uint32_t prev_cp = 0;
  bool started = dummy;
  for (size_t i = *pos; i < len;) {
    // BPE: user-defined pieces are frozen symbols: no merge crosses them, so the word ends
    // before one, and one at the start of a word is emitted as is. (Unigram scores them
    // in its lattice, as libsentencepiece does.)
    const Special* user = user_defined_count_ > 0 && kind_ == TokenizerKind::SentencePieceBpe
                              ? match_special(text + i, len - i, true)
                              : nullptr;
    if (user != nullptr) {
      if (word_bytes > 0) break;
      emit(user->id, out, capacity, count);
      scratch.prev_unknown = false;
      i += user->size;
      *pos = *word_end = i;
      continue;
    }
    if (text[i] == ' ') {
      size_t j = i + 1;
      if (remove_extra_whitespaces_) {
        while (j < len && text[j] == ' ') ++j;
        if (j == len) {  // trailing spaces vanish
          i = j;
          *word_end = j;
          break;
        }
      }
      if (started && !prev_mark && spm_split_words_ && !(glue_count_ > 0 && is_glue(prev_cp))) break;
      word_bytes += 3;
      prev_mark = true;
      started = true;
      i = j;
      *word_end = i;
      continue;
    }
    const unicode::Decoded d = unicode::decode_utf8(text + i, len - i);
    word_bytes += d.valid ? d.length : 3;
    prev_mark = d.valid && d.length == 3 && std::memcmp(text + i, kSpaceMark, 3) == 0;
    prev_cp = d.cp;
    started = true;
    i += d.length;
    *word_end = i;
  }
  return word_bytes;
}

size_t Tokenizer::copy_spm_word(const uint8_t* text, size_t pos, size_t word_end, size_t len, bool dummy,
                                uint8_t* buf) const {
  size_t n = 0;
  if (dummy) {
    std::memcpy(buf, kSpaceMark, 3);
    n = 3;
  }
  for (size_t i = pos; i < word_end;) {
    if (text[i] == ' ') {
      size_t j = i + 1;
      if (remove_extra_whitespaces_) {
        while (j < len && text[j] == ' ') ++j;
        if (j == len) {
          i = j;
          continue;
        }
      }
      std::memcpy(buf + n, kSpaceMark, 3);
      n += 3;
      i = j;
      continue;
    }
    i += append_char_or_replacement(text + i, len - i, buf, &n);
  }
  return n;
}

Error Tokenizer::spm_word(const uint8_t* word, size_t n, Scratch& scratch, int32_t* out, size_t capacity,
                          size_t* count) const {
  if (n == 0) return Error::Ok;
  SpmSymbol* sym = scratch.symbols<SpmSymbol>(n);
  PairQueue queue{scratch.queue(n), 0, 3 * n};
  size_t symbols = 0;
  for (size_t i = 0; i < n;) {
    const uint32_t len =
        std::max<uint32_t>(1, std::min<uint32_t>(unicode::sequence_length(word[i]), static_cast<uint32_t>(n - i)));
    sym[symbols] = {static_cast<int32_t>(symbols) - 1, -1, static_cast<uint32_t>(i), len};
    if (symbols > 0) sym[symbols - 1].next = static_cast<int32_t>(symbols);
    ++symbols;
    i += len;
  }
  auto try_pair = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t size = sym[l].size + sym[r].size;
    const int32_t id = find_piece(reinterpret_cast<const char*>(word + sym[l].start), size);
    if (id < 0) return;
    const uint8_t a = attrs_[id];
    if (a != kAttrNormal && a != kAttrUserDefined && a != kAttrUnused) return;
    queue.push({scores_[id], static_cast<uint32_t>(l), static_cast<uint32_t>(r), static_cast<int32_t>(size)});
  };
  for (size_t i = 0; i + 1 < symbols; ++i) try_pair(static_cast<int32_t>(i), static_cast<int32_t>(i + 1));
  while (queue.size > 0) {
    const QueuedPair p = queue.pop();
    SpmSymbol& l = sym[p.left];
    SpmSymbol& r = sym[p.right];
    if (l.size == 0 || r.size == 0 || l.size + r.size != static_cast<uint32_t>(p.aux)) continue;
    l.size += r.size;
    r.size = 0;
    l.next = r.next;
    if (l.next >= 0) sym[l.next].prev = static_cast<int32_t>(p.left);
    try_pair(l.prev, static_cast<int32_t>(p.left));
    try_pair(static_cast<int32_t>(p.left), l.next);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    const uint8_t* s = word + sym[i].start;
    emit_spm_piece(find_piece(reinterpret_cast<const char*>(s), sym[i].size), s, sym[i].size, scratch, out, capacity,
                   count);
  }
  return Error::Ok;
}

void Tokenizer::emit_spm_piece(int32_t id, const uint8_t* s, uint32_t size, Scratch& scratch, int32_t* out,
                               size_t capacity, size_t* count) const {
  if (id >= 0 && attrs_[id] != kAttrUnknown) {
    emit(id, out, capacity, count);
    scratch.prev_unknown = false;
  } else if (byte_fallback_) {
    for (uint32_t k = 0; k < size; ++k) emit(byte_ids_[s[k]], out, capacity, count);
    scratch.prev_unknown = false;
  } else {
    if (!scratch.prev_unknown) emit(unk_id_, out, capacity, count);  // a run of unknowns is one <unk>
    scratch.prev_unknown = true;
  }
}
bool Tokenizer::is_glue(uint32_t cp) const {
  for (uint32_t k = 0; k < glue_count_; ++k) {
    if (glue_[k] == cp) return true;
  }
  return false;
}

Error Tokenizer::spm_ranked_word(const uint8_t* word, size_t n, Scratch& scratch, int32_t* out, size_t capacity,
                                 size_t* count) const {
  if (n == 0) return Error::Ok;
  // One symbol per character in the vocabulary, else one per byte (<0xXX>) or <unk>.
  BpeSymbol* sym = scratch.symbols<BpeSymbol>(n);
  int32_t symbols = 0;
  auto add = [&](int32_t id) {
    sym[symbols] = {symbols - 1, -1, id};
    if (symbols > 0) sym[symbols - 1].next = symbols;
    ++symbols;
  };
  for (size_t i = 0; i < n;) {
    const uint32_t len =
        std::max<uint32_t>(1, std::min<uint32_t>(unicode::sequence_length(word[i]), static_cast<uint32_t>(n - i)));
    const int32_t id = find_piece(reinterpret_cast<const char*>(word + i), len);
    if (id >= 0 && attrs_[id] != kAttrControl && attrs_[id] != kAttrUnknown) {
      add(id);
    } else if (byte_fallback_) {
      for (uint32_t k = 0; k < len; ++k) add(byte_ids_[word[i + k]]);
    } else {
      add(unk_id_);
    }
    i += len;
  }
  merge_by_rank(sym, static_cast<size_t>(symbols), scratch.queue(n),
                [this](int32_t a, int32_t b, uint32_t* rank) { return lookup_merge(a, b, rank); });
  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    const bool unknown = sym[i].id == unk_id_;
    if (!(unknown && scratch.prev_unknown)) emit(sym[i].id, out, capacity, count);  // fuse runs of <unk>
    scratch.prev_unknown = unknown;
  }
  return Error::Ok;
}

void Tokenizer::find_merge_glue() {
  // Merges by rank: a word boundary (a space mark after another character) can be cut
  // unless some merge joins a piece ending in that character to one starting with the
  // mark (Gemma: ">" + "▁</"). Those characters are kept; with too many, no cuts.
  const auto* m = fb_->merges();
  for (uint32_t i = 0; i + 1 < m->size() && spm_split_words_; i += 2) {
    const PieceView a = piece(static_cast<int32_t>(m->Get(i))), b = piece(static_cast<int32_t>(m->Get(i + 1)));
    if (b.size < 3 || std::memcmp(b.data, kSpaceMark, 3) != 0 || a.size == 0) continue;
    if (a.size >= 3 && std::memcmp(a.data + a.size - 3, kSpaceMark, 3) == 0) continue;
    size_t start = a.size - 1;
    while (start > 0 && (static_cast<uint8_t>(a.data[start]) & 0xC0) == 0x80) --start;
    const uint32_t cp = unicode::decode_utf8(reinterpret_cast<const uint8_t*>(a.data + start), a.size - start).cp;
    bool known = false;
    for (uint32_t k = 0; k < glue_count_; ++k) known |= glue_[k] == cp;
    if (known) continue;
    if (glue_count_ == kMaxGlue) {
      spm_split_words_ = false;
    } else {
      glue_[glue_count_++] = cp;
    }
  }
}

void Tokenizer::check_word_split() {
  // Words can be encoded separately unless some piece glues a character to a
  // following space mark ("a▁"); then a merge (or a unigram piece) could cross the word
  // boundary.
  for (int32_t id = 0; id < vocab_size_ && spm_split_words_; ++id) {
    const uint8_t a = attrs_[id];
    if (a != kAttrNormal && a != kAttrUserDefined && a != kAttrUnused) continue;
    const PieceView p = piece(id);
    const uint8_t* s = reinterpret_cast<const uint8_t*>(p.data);
    bool prev_is_mark = true;
    for (size_t i = 0; i < p.size;) {
      const bool mark = i + 3 <= p.size && std::memcmp(s + i, kSpaceMark, 3) == 0;
      if (mark && !prev_is_mark) {
        spm_split_words_ = false;
        break;
      }
      prev_is_mark = mark;
      i += mark ? 3 : 1;
      while (!mark && i < p.size && (s[i] & 0xC0) == 0x80) ++i;
    }
  }
}

}  // namespace tern
