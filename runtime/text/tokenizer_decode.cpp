// Decoding: a token's text (SentencePiece spaces, byte pieces, <unk>) and the streaming
// TokenDecoder that reassembles UTF-8 characters across tokens.
#include <algorithm>
#include <cstring>

#include "runtime/text/tokenizer.h"
#include "runtime/text/tokenizer_internal.h"
#include "runtime/text/unicode.h"

namespace tern {
using namespace tokenizer_detail;

size_t Tokenizer::token_text(int32_t id, bool first, uint8_t* buf, size_t capacity) const {
  const uint8_t a = attrs_[id];
  if (a == kAttrControl) return 0;
  const PieceView p = piece(id);
  const uint8_t* s = reinterpret_cast<const uint8_t*>(p.data);
  if (kind_ == TokenizerKind::ByteLevelBpe) {
    const size_t n = std::min(p.size, capacity);
    std::memcpy(buf, s, n);
    return n;
  }
  if (a == kAttrByte) {
    // "<0xXX>"
    auto hex = [](uint8_t c) -> int { return c >= 'a' ? c - 'a' + 10 : c >= 'A' ? c - 'A' + 10 : c - '0'; };
    if (p.size != 6 || capacity < 1) return 0;
    buf[0] = static_cast<uint8_t>(hex(s[3]) * 16 + hex(s[4]));
    return 1;
  }
  if (a == kAttrUnknown) {
    const size_t n = std::min(unk_surface_size_, capacity);
    std::memcpy(buf, unk_surface_, n);
    return n;
  }
  size_t i = 0, n = 0;
  if (first && add_dummy_prefix_) {
    // SentencePiece drops the dummy-prefix space; with remove_extra_whitespaces it drops
    // every leading space (the decoder keeps `first` until something else comes out).
    do {
      if (p.size < i + 3 || std::memcmp(s + i, kSpaceMark, 3) != 0) break;
      i += 3;
    } while (remove_extra_whitespaces_);
  }
  while (i < p.size && n < capacity) {
    if (i + 3 <= p.size && std::memcmp(s + i, kSpaceMark, 3) == 0) {
      buf[n++] = ' ';
      i += 3;
    } else {
      buf[n++] = s[i++];
    }
  }
  return n;
}

size_t Tokenizer::token_bytes(int32_t id, uint8_t* buf, size_t capacity) const {
  if (id < 0 || id >= vocab_size_) return 0;
  return token_text(id, false, buf, capacity);
}

size_t Tokenizer::max_token_bytes() { return kMaxPieceBytes + kMaxUnknownSurface; }

void TokenDecoder::reset() {
  first_ = true;
  pending_size_ = 0;
}

// Moves complete characters from pending + bytes to out; keeps an incomplete tail
// unless `final`. Returns the bytes written. With out == nullptr, only counts them and
// leaves the decoder as it was.
size_t TokenDecoder::drain(const uint8_t* bytes, size_t size, bool final, uint8_t* out) {
  if (out == nullptr) {
    TokenDecoder probe = *this;
    uint8_t sink[4 * (kMaxPieceBytes + kMaxUnknownSurface + 4)];
    return probe.drain(bytes, size, final, sink);
  }
  size_t written = 0;
  size_t i = 0;
  // Feed bytes one at a time through the 4-byte pending buffer.
  for (;;) {
    while (pending_size_ < 4 && i < size) pending_[pending_size_++] = bytes[i++];
    if (pending_size_ == 0) break;
    const uint32_t want = unicode::sequence_length(pending_[0]);
    if (want != 0 && pending_size_ < want && i == size && !final) {
      // Incomplete so far: valid prefix? Then wait for more bytes.
      bool prefix_ok = true;
      for (uint32_t k = 1; k < pending_size_; ++k) prefix_ok &= (pending_[k] & 0xC0) == 0x80;
      if (prefix_ok) break;
    }
    const size_t taken = append_char_or_replacement(pending_, pending_size_, out, &written);
    std::memmove(pending_, pending_ + taken, pending_size_ - taken);
    pending_size_ -= taken;
  }
  return written;
}

Result<size_t> TokenDecoder::push(int32_t id, char* out, size_t capacity) {
  const Tokenizer& t = *tokenizer_;
  TERN_CHECK_OR_RETURN(id >= 0 && id < t.vocab_size_, Error::InvalidToken, "token id %d outside vocabulary of %d", id,
                       t.vocab_size_);
  if (t.attrs_[id] == kAttrControl) return size_t{0};
  uint8_t raw[kMaxPieceBytes + kMaxUnknownSurface];
  const size_t raw_size = t.token_text(id, first_, raw, sizeof raw);
  const size_t need = drain(raw, raw_size, false, nullptr);
  TERN_CHECK_OR_RETURN(capacity >= need, Error::OutOfRange, "decoder output of %zu bytes is too small (need %zu)",
                       capacity, need);
  if (raw_size > 0 || !t.remove_extra_whitespaces_) first_ = false;
  return drain(raw, raw_size, false, reinterpret_cast<uint8_t*>(out));
}

Result<size_t> TokenDecoder::flush(char* out, size_t capacity) {
  const size_t need = drain(nullptr, 0, true, nullptr);
  TERN_CHECK_OR_RETURN(capacity >= need, Error::OutOfRange, "decoder flush needs %zu bytes of output", need);
  const size_t written = drain(nullptr, 0, true, reinterpret_cast<uint8_t*>(out));
  reset();
  return written;
}

}  // namespace tern
