#include <cstdint>

#include "runtime/text/unicode.h"

namespace tern::nfc_tables {
struct Decomposition {
  uint32_t cp;
  uint16_t offset;
  uint16_t size;
};
struct Composition {
  uint32_t first;
  uint32_t second;
  uint32_t composite;
};
extern const uint16_t kStage1[];
extern const uint16_t kStage2[];
extern const uint32_t kDecompositionCount;
extern const Decomposition kDecompositions[];
extern const uint32_t kDecompositionData[];
extern const uint32_t kCompositionCount;
extern const Composition kCompositions[];
}  // namespace tern::nfc_tables

namespace tern::unicode {
namespace {

namespace t = nfc_tables;

// Hangul syllables decompose and compose by arithmetic (Unicode 3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

uint16_t info(uint32_t cp) { return cp < 0x110000 ? t::kStage2[t::kStage1[cp >> 8] * 256 + (cp & 255)] : 0; }
uint8_t ccc(uint32_t cp) { return static_cast<uint8_t>(info(cp) & 0xFF); }

const t::Decomposition* find_decomposition(uint32_t cp) {
  uint32_t lo = 0, hi = t::kDecompositionCount;
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (t::kDecompositions[mid].cp < cp) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < t::kDecompositionCount && t::kDecompositions[lo].cp == cp ? &t::kDecompositions[lo] : nullptr;
}

// The primary composite of a + b, or 0.
uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  uint32_t lo = 0, hi = t::kCompositionCount;
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    const t::Composition& c = t::kCompositions[mid];
    if (c.first < a || (c.first == a && c.second < b)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo < t::kCompositionCount && t::kCompositions[lo].first == a && t::kCompositions[lo].second == b) {
    return t::kCompositions[lo].composite;
  }
  return 0;
}

}  // namespace

bool nfc_quick_check(const uint8_t* s, size_t len) {
  uint8_t last = 0;
  for (size_t i = 0; i < len;) {
    if (s[i] < 0x80) {  // ASCII: NFC_QC=Yes, class 0
      last = 0;
      ++i;
      continue;
    }
    const Decoded d = decode_utf8(s + i, len - i);
    i += d.length;
    const uint16_t v = d.valid ? info(d.cp) : 0;
    const uint8_t c = static_cast<uint8_t>(v & 0xFF);
    if ((v & 0x100) != 0 || (c != 0 && last > c)) return false;
    last = c;
  }
  return true;
}

size_t nfc(const uint8_t* s, size_t len, uint32_t* cps, uint8_t* out) {
  // Canonical decomposition.
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    const Decoded d = decode_utf8(s + i, len - i);
    i += d.length;
    const uint32_t cp = d.cp;
    if (cp >= kSBase && cp < kSBase + kSCount) {
      const uint32_t index = cp - kSBase;
      cps[n++] = kLBase + index / kNCount;
      cps[n++] = kVBase + (index % kNCount) / kTCount;
      if (index % kTCount != 0) cps[n++] = kTBase + index % kTCount;
    } else if (const t::Decomposition* dec = cp >= 0xC0 ? find_decomposition(cp) : nullptr) {
      for (uint16_t k = 0; k < dec->size; ++k) cps[n++] = t::kDecompositionData[dec->offset + k];
    } else {
      cps[n++] = cp;
    }
  }
  // Canonical ordering: marks of each run sorted by class, stably.
  for (size_t i = 1; i < n; ++i) {
    const uint32_t cp = cps[i];
    const uint8_t c = ccc(cp);
    if (c == 0) continue;
    size_t j = i;
    while (j > 0 && ccc(cps[j - 1]) > c) {
      cps[j] = cps[j - 1];
      --j;
    }
    cps[j] = cp;
  }
  // Canonical composition (UAX #15): each character joins the last starter unless blocked.
  size_t w = 0;
  if (n > 0) {
    size_t starter = 0;
    int last = ccc(cps[0]) != 0 ? 256 : 0;
    w = 1;
    for (size_t i = 1; i < n; ++i) {
      const uint32_t cp = cps[i];
      const int c = ccc(cp);
      const uint32_t composite = last < c || last == 0 ? compose(cps[starter], cp) : 0;
      if (composite != 0 && (last < c || last == 0) && (last != 0 || w == starter + 1)) {
        cps[starter] = composite;
        continue;
      }
      if (c == 0) starter = w;
      last = c;
      cps[w++] = cp;
    }
  }
  size_t bytes = 0;
  for (size_t i = 0; i < w; ++i) bytes += encode_utf8(cps[i], out + bytes);
  return bytes;
}

}  // namespace tern::unicode
