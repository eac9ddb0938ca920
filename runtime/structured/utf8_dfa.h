// Byte DFAs for characters: one UTF-8 encoded character of a set of code points (a character
// class, '.'), or one byte of a literal, as 256-entry tables in the grammar's region.
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/error.h"
#include "runtime/structured/grammar_program.h"
#include "runtime/structured/region.h"

namespace tern::grammar_detail {

struct CpRange {
  uint32_t lo, hi;
};

// Sorts and merges ranges, complements them when negated, removes the surrogates. `r`
// has room for n + 2 ranges. Returns how many there are now.
uint32_t normalize_ranges(CpRange* r, uint32_t n, bool negated);

// The tables grow at the region's low end (state s at tables() + 256 * s), so nothing else
// may take low memory while they are built.
class DfaBuilder {
 public:
  explicit DfaBuilder(Region& region) : region_(region) {}

  Error init();
  const uint16_t* tables() const { return tables_; }
  uint32_t count() const { return n_; }

  // The DFA matching one byte.
  Result<uint32_t> byte(uint8_t b);
  // The DFA matching one character of the sorted, disjoint, merged ranges (no surrogates).
  // Returns its first state; *states: how many it has.
  Result<uint32_t> chars(const CpRange* ranges, uint32_t n, uint32_t* states);

 private:
  static constexpr uint32_t kMaxDfas = 1024;
  static constexpr uint32_t kNotBuilt = UINT32_MAX;

  uint16_t* table(uint32_t s) { return tables_ + static_cast<size_t>(s) * 256; }
  Result<uint32_t> new_state();
  bool contains(uint32_t cp) const { return any_in(cp, cp); }
  bool any_in(uint32_t a, uint32_t b) const;
  // The state for a sequence's last byte over code points [base, base + 64); reject if none.
  Result<uint16_t> last_byte(uint32_t first, uint32_t base);
  // A state whose continuation bytes 0x80..0xBF go to row[]; reject if all do, and the
  // existing state of this DFA with the same row if there is one.
  Result<uint16_t> middle(uint32_t first, const uint16_t* row);
  bool same_dfa(uint32_t a, uint32_t b, uint32_t count);

  Region& region_;
  uint16_t* tables_ = nullptr;
  uint32_t n_ = 0;
  uint32_t byte_dfa_[256];
  uint32_t* built_ = nullptr;
  uint32_t n_built_ = 0;
  const CpRange* ranges_ = nullptr;
  uint32_t n_ranges_ = 0;
};

}  // namespace tern::grammar_detail
