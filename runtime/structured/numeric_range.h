// Ranges of JSON numbers as GBNF expressions: the integers between two bounds (either may be
// open), and the decimals between two integer bounds, digit by digit (JSON Schema's minimum,
// maximum, exclusiveMinimum and exclusiveMaximum).
#pragma once

#include <cstdint>

#include "runtime/structured/gbnf_writer.h"

namespace tern {

// A bound of a range: absent, or an integer.
struct RangeBound {
  bool present = false;
  int64_t value = 0;
};

// Unbounded integers have at most this many digits.
inline constexpr int kIntegerDigits = 16;

// Integers in [lo, hi] (either side may be open) as decimal text: no leading zeros, no -0.
// An alternation for the caller to group; nothing when the range is empty. Bounds have at
// most 15 digits; an open side reaches kIntegerDigits digits.
void write_integer_range(GbnfWriter& out, const RangeBound& lo, const RangeBound& hi);

// Numbers with integer bounds: the integers in [lo, hi] (the inclusive integer bounds, which
// must not be empty), also written with a zero fraction (3.0), and the non-integers strictly
// between `min` and `max` (the bounds as written, inclusive or exclusive alike), with a
// fraction of at most 16 digits ending in a nonzero one. An alternation, as above.
void write_number_range(GbnfWriter& out, const RangeBound& lo, const RangeBound& hi, const RangeBound& min,
                        const RangeBound& max);

}  // namespace tern
