// Byte DFAs for characters: the UTF-8 lead byte, then one state per distinct row of
// continuation bytes; a class written twice reuses its first table.
#include "runtime/structured/utf8_dfa.h"

#include <cstring>

namespace tern::grammar_detail {

uint32_t normalize_ranges(CpRange* r, uint32_t n, bool negated) {
  for (uint32_t i = 1; i < n; ++i) {  // insertion sort: classes are short
    const CpRange x = r[i];
    uint32_t j = i;
    while (j > 0 && r[j - 1].lo > x.lo) r[j] = r[j - 1], --j;
    r[j] = x;
  }
  uint32_t m = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (m > 0 && r[i].lo <= r[m - 1].hi + 1) {
      if (r[i].hi > r[m - 1].hi) r[m - 1].hi = r[i].hi;
    } else {
      r[m++] = r[i];
    }
  }
  if (negated) {  // the gaps, in place: gap k is written after range k was read
    uint32_t k = 0, next = 0;
    for (uint32_t i = 0; i < m; ++i) {
      const CpRange x = r[i];
      if (x.lo > next) r[k++] = CpRange{next, x.lo - 1};
      next = x.hi + 1;
    }
    if (next <= 0x10FFFF) r[k++] = CpRange{next, 0x10FFFF};
    m = k;
  }
  // U+D800..U+DFFF cannot be encoded in UTF-8.
  for (uint32_t i = 0; i < m; ++i) {
    const CpRange x = r[i];
    if (x.hi < 0xD800 || x.lo > 0xDFFF) continue;
    const bool left = x.lo<0xD800, right = x.hi> 0xDFFF;
    if (left && right) {
      std::memmove(r + i + 2, r + i + 1, (m - i - 1) * sizeof(CpRange));
      r[i] = CpRange{x.lo, 0xD7FF};
      r[i + 1] = CpRange{0xE000, x.hi};
      ++m;
      ++i;
    } else if (left) {
      r[i].hi = 0xD7FF;
    } else if (right) {
      r[i].lo = 0xE000;
    } else {
      std::memmove(r + i, r + i + 1, (m - i - 1) * sizeof(CpRange));
      --m;
      --i;
    }
  }
  return m;
}

Error DfaBuilder::init() {
  if ((tables_ = region_.low<uint16_t>(0)) == nullptr) return no_room(region_, "character tables");
  built_ = region_.high<uint32_t>(2 * kMaxDfas);
  if (built_ == nullptr) return no_room(region_, "character tables");
  for (uint32_t& b : byte_dfa_) b = kNotBuilt;
  return Error::Ok;
}

Result<uint32_t> DfaBuilder::byte(uint8_t b) {
  if (byte_dfa_[b] != kNotBuilt) return byte_dfa_[b];
  TERN_ASSIGN_OR_RETURN(const uint32_t s, new_state());
  table(s)[b] = kDfaAccept;
  byte_dfa_[b] = s;
  return s;
}

Result<uint32_t> DfaBuilder::chars(const CpRange* ranges, uint32_t n, uint32_t* states) {
  ranges_ = ranges;
  n_ranges_ = n;
  const size_t mark = region_.low_mark();
  const uint32_t first = n_;
  TERN_ASSIGN_OR_RETURN(const uint32_t start, new_state());
  for (uint32_t b = 0; b < 0x80; ++b) table(start)[b] = contains(b) ? kDfaAccept : kDfaReject;
  for (uint32_t b = 0xC2; b <= 0xDF; ++b) {
    TERN_ASSIGN_OR_RETURN(table(start)[b], last_byte(first, (b & 0x1F) << 6));
  }
  for (uint32_t b = 0xE0; b <= 0xEF; ++b) {
    const uint32_t lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
    uint16_t row[64];
    for (uint32_t c = 0; c < 64; ++c) row[c] = kDfaReject;
    for (uint32_t c = lo; c <= hi; ++c) {
      TERN_ASSIGN_OR_RETURN(row[c - 0x80], last_byte(first, ((b & 0x0F) << 12) | ((c & 0x3F) << 6)));
    }
    TERN_ASSIGN_OR_RETURN(table(start)[b], middle(first, row));
  }
  for (uint32_t b = 0xF0; b <= 0xF4; ++b) {
    const uint32_t lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
    uint16_t row2[64];
    for (uint32_t c = 0; c < 64; ++c) row2[c] = kDfaReject;
    for (uint32_t c1 = lo; c1 <= hi; ++c1) {
      const uint32_t base1 = ((b & 0x07) << 18) | ((c1 & 0x3F) << 12);
      if (!any_in(base1, base1 + 0xFFF)) continue;
      uint16_t row3[64];
      for (uint32_t c2 = 0x80; c2 <= 0xBF; ++c2) {
        TERN_ASSIGN_OR_RETURN(row3[c2 - 0x80], last_byte(first, base1 | ((c2 & 0x3F) << 6)));
      }
      TERN_ASSIGN_OR_RETURN(row2[c1 - 0x80], middle(first, row3));
    }
    TERN_ASSIGN_OR_RETURN(table(start)[b], middle(first, row2));
  }
  *states = n_ - first;
  // The same table built before (a class written twice): use that one.
  for (uint32_t k = 0; k < n_built_; ++k) {
    const uint32_t other = built_[2 * k], count = built_[2 * k + 1];
    if (count == *states && same_dfa(other, first, count)) {
      n_ = first;
      region_.low_release(mark);
      return other;
    }
  }
  if (n_built_ < kMaxDfas) {
    built_[2 * n_built_] = first;
    built_[2 * n_built_ + 1] = *states;
    ++n_built_;
  }
  return first;
}

Result<uint32_t> DfaBuilder::new_state() {
  if (n_ >= kMaxDfaStates)
    return fail(Error::GrammarTooLarge, "the grammar's characters need more than %u DFA states", kMaxDfaStates);
  if (region_.low<uint16_t>(256) == nullptr) return no_room(region_, "character tables");
  uint16_t* t = table(n_);
  for (int i = 0; i < 256; ++i) t[i] = kDfaReject;
  return n_++;
}

bool DfaBuilder::any_in(uint32_t a, uint32_t b) const {
  uint32_t lo = 0, hi = n_ranges_;
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (ranges_[mid].hi < a) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < n_ranges_ && ranges_[lo].lo <= b;
}

Result<uint16_t> DfaBuilder::last_byte(uint32_t first, uint32_t base) {
  if (!any_in(base, base + 63)) return kDfaReject;
  uint16_t row[64];
  for (uint32_t c = 0; c < 64; ++c) row[c] = contains(base + c) ? kDfaAccept : kDfaReject;
  return middle(first, row);
}

Result<uint16_t> DfaBuilder::middle(uint32_t first, const uint16_t* row) {
  bool any = false;
  for (uint32_t c = 0; c < 64 && !any; ++c) any = row[c] != kDfaReject;
  if (!any) return kDfaReject;
  for (uint32_t s = first + 1; s < n_; ++s) {
    if (std::memcmp(table(s) + 0x80, row, 64 * sizeof(uint16_t)) == 0) return static_cast<uint16_t>(s);
  }
  TERN_ASSIGN_OR_RETURN(const uint32_t s, new_state());
  std::memcpy(table(s) + 0x80, row, 64 * sizeof(uint16_t));
  return static_cast<uint16_t>(s);
}

bool DfaBuilder::same_dfa(uint32_t a, uint32_t b, uint32_t count) {
  for (uint32_t s = 0; s < count; ++s) {
    const uint16_t* x = table(a + s);
    const uint16_t* y = table(b + s);
    for (int i = 0; i < 256; ++i) {
      const bool xs = x[i] < kMaxDfaStates, ys = y[i] < kMaxDfaStates;
      if (xs != ys || (xs ? x[i] - a != y[i] - b : x[i] != y[i])) return false;
    }
  }
  return true;
}

}  // namespace tern::grammar_detail
