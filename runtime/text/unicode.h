// UTF-8 decoding and the Unicode classes the tokenizers need (letters, numbers, white
// space), looked up in tables generated at build time from the UCD's UnicodeData.txt.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern::unicode {

enum UnicodeClass : uint8_t {
  kLetter = 1,      // general category L* (\p{L})
  kNumber = 2,      // general category N* (\p{N})
  kWhitespace = 4,  // White_Space property (\s in Unicode-aware regex engines)
};

constexpr uint32_t kReplacementChar = 0xFFFD;

// Class flags of a code point (0 for unassigned and out-of-range values).
uint8_t classify(uint32_t cp);
inline bool is_letter(uint32_t cp) { return classify(cp) & kLetter; }
inline bool is_number(uint32_t cp) { return classify(cp) & kNumber; }
inline bool is_whitespace(uint32_t cp) { return classify(cp) & kWhitespace; }

struct Decoded {
  uint32_t cp;      // kReplacementChar when !valid
  uint32_t length;  // bytes consumed: the sequence length, or 1 for an invalid byte
  bool valid;
};

// Decodes the character at s[0] (`len` > 0). Strict UTF-8: overlong forms, surrogates,
// values above U+10FFFF and truncated sequences are invalid; an invalid sequence
// consumes exactly one byte, as SentencePiece's normalizer does.
Decoded decode_utf8(const uint8_t* s, size_t len);

// Writes cp as UTF-8 into out (4 bytes available); returns the byte count.
size_t encode_utf8(uint32_t cp, uint8_t* out);

// Length of the sequence a lead byte announces (1..4), or 0 for a continuation or
// invalid lead byte.
inline uint32_t sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

// Unicode normalization form C (canonical decomposition, reordering, composition), with
// tables generated from the UCD (runtime/text/tools/nfc_gen.cpp). Invalid UTF-8 bytes count as
// U+FFFD, one per byte, as everywhere in the tokenizers.
// True when `s` is certainly NFC already (every character NFC_QC=Yes, marks in order): the
// common case, which needs no copy.
bool nfc_quick_check(const uint8_t* s, size_t len);
// Working memory nfc() needs for `len` input bytes, and the most bytes it writes.
inline size_t nfc_work_bytes(size_t len) { return (4 * len + 4) * sizeof(uint32_t); }
inline size_t nfc_output_bytes(size_t len) { return 3 * len + 4; }
// NFC of s[0..len) into out (nfc_output_bytes(len) available), using `work`
// (nfc_work_bytes(len), 4-byte aligned); returns the bytes written.
size_t nfc(const uint8_t* s, size_t len, uint32_t* work, uint8_t* out);

}  // namespace tern::unicode
