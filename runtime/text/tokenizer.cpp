// The Tokenizer's shared parts: pieces and their attributes, special tokens, and encode(), which
// cuts the text at special tokens and hands each fragment to the model's encoder.
#include "runtime/text/tokenizer.h"

#include <algorithm>
#include <cstring>

#include "runtime/text/tokenizer_internal.h"
#include "runtime/text/unicode.h"

namespace tern {
using namespace tokenizer_detail;

namespace tokenizer_detail {

size_t append_char_or_replacement(const uint8_t* text, size_t avail, uint8_t* out, size_t* size) {
  const unicode::Decoded d = unicode::decode_utf8(text, avail);
  if (d.valid) {
    std::memcpy(out + *size, text, d.length);
    *size += d.length;
  } else {
    std::memcpy(out + *size, kReplacement, 3);
    *size += 3;
  }
  return d.length;
}

}  // namespace tokenizer_detail

PieceView Tokenizer::piece(int32_t id) const {
  if (id < 0 || id >= vocab_size_) return {};
  const uint32_t begin = piece_offsets_[id], end = piece_offsets_[id + 1];
  return {reinterpret_cast<const char*>(piece_bytes_ + begin), end - begin};
}

bool Tokenizer::is_control(int32_t id) const { return id >= 0 && id < vocab_size_ && attrs_[id] == kAttrControl; }

Error Tokenizer::build_specials(ArenaAllocator& arena, uint32_t count) {
  // Specials, longest first so "<|eot_id|>" wins over any shorter prefix.
  TERN_ASSIGN_OR_RETURN(Special * specials, arena.allocate_array<Special>(count, ArenaPurpose::Tokenizer, 64));
  uint32_t n = 0;
  for (int32_t id = 0; id < vocab_size_; ++id) {
    const uint8_t a = attrs_[id];
    const PieceView p = piece(id);
    if ((a != kAttrControl && a != kAttrUserDefined) || p.size == 0) continue;
    specials[n++] = {id, piece_offsets_[id], static_cast<uint32_t>(p.size), a == kAttrUserDefined};
    if (a == kAttrUserDefined) ++user_defined_count_;
    const uint8_t first = static_cast<uint8_t>(p.data[0]);
    special_first_byte_[first >> 3] |= static_cast<uint8_t>(1u << (first & 7));
  }
  std::sort(specials, specials + n,
            [](const Special& x, const Special& y) { return x.size != y.size ? x.size > y.size : x.id < y.id; });
  specials_ = specials;
  special_count_ = n;
  return Error::Ok;
}

const Tokenizer::Special* Tokenizer::match_special(const uint8_t* s, size_t len, bool user_defined_only) const {
  const uint8_t b = s[0];
  if (!(special_first_byte_[b >> 3] & (1u << (b & 7)))) return nullptr;
  for (uint32_t k = 0; k < special_count_; ++k) {  // longest first
    const Special& sp = specials_[k];
    if (user_defined_only && !sp.always) continue;
    if (sp.size <= len && std::memcmp(piece_bytes_ + sp.offset, s, sp.size) == 0) return &sp;
  }
  return nullptr;
}

size_t Tokenizer::encode_scratch_bytes(size_t text_len) const {
  // A run never exceeds the text after replacements (x3) plus the dummy-prefix mark.
  const size_t runs = Scratch::required(3 * text_len + 3);
  if (!nfc_) return runs;
  // NFC: the normalized text stays at the tail; its working memory overlaps the runs'.
  return std::max(runs, unicode::nfc_work_bytes(text_len)) + align_up(unicode::nfc_output_bytes(text_len), 16) + 32;
}

Result<size_t> Tokenizer::encode(const char* text, size_t len, bool add_bos, bool parse_special, int32_t* out,
                                 size_t capacity, size_t* needed, void* scratch_memory, size_t scratch_bytes) {
  TERN_CHECK_OR_RETURN(piece_table_ != nullptr, Error::InvalidState, "tokenizer is not initialised");
  TERN_CHECK_OR_RETURN(text != nullptr || len == 0, Error::InvalidArgument, "text is null");
  TERN_CHECK_OR_RETURN(out != nullptr || capacity == 0, Error::InvalidArgument, "output is null");
  Scratch scratch(scratch_memory ? static_cast<uint8_t*>(scratch_memory) : scratch_,
                  scratch_memory ? scratch_bytes : scratch_bytes_);
  size_t count = 0;
  if (add_bos && bos_id_ >= 0) emit(bos_id_, out, capacity, &count);
  const uint8_t* s = reinterpret_cast<const uint8_t*>(text);
  size_t fragment_start = 0;
  if (special_count_ > 0) {
    // SentencePiece matches user-defined pieces inside its normalizer instead (they
    // interact with the dummy prefix and whitespace handling).
    const bool user_defined_here = kind_ == TokenizerKind::ByteLevelBpe;
    for (size_t i = 0; i < len;) {
      const Special* match = nullptr;
      if (parse_special || (user_defined_here && user_defined_count_ > 0)) {
        match = match_special(s + i, len - i, false);
        if (match != nullptr && match->always && !user_defined_here) match = nullptr;
        if (match != nullptr && !match->always && !parse_special) match = nullptr;
      }
      if (match == nullptr) {
        ++i;
        continue;
      }
      if (i > fragment_start) {
        TERN_RETURN_IF_ERROR(encode_fragment(s + fragment_start, i - fragment_start, fragment_start == 0, scratch, out,
                                             capacity, &count));
      }
      emit(match->id, out, capacity, &count);
      i += match->size;
      fragment_start = i;
    }
  }
  if (len > fragment_start) {
    TERN_RETURN_IF_ERROR(
        encode_fragment(s + fragment_start, len - fragment_start, fragment_start == 0, scratch, out, capacity, &count));
  }
  if (needed != nullptr) *needed = count;
  TERN_CHECK_OR_RETURN(count <= capacity, Error::OutOfRange, "text needs %zu token ids, output holds %zu", count,
                       capacity);
  return count;
}

Error Tokenizer::encode_fragment(const uint8_t* text, size_t len, bool first_fragment, Scratch& scratch, int32_t* out,
                                 size_t capacity, size_t* count) const {
  if (kind_ == TokenizerKind::ByteLevelBpe) return encode_bpe_fragment(text, len, scratch, out, capacity, count);
  return encode_spm_fragment(text, len, first_fragment, scratch, out, capacity, count);
}

}  // namespace tern
