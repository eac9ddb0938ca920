// Ranges of numbers as GBNF: each length of decimal text between the bounds, the first digit
// that departs from a bound, then free digits.
#include "runtime/structured/numeric_range.h"

#include <cstdio>
#include <cstring>

namespace tern {

namespace {

// One digit in [lo, hi], then k digits.
void digits(GbnfWriter& out, char lo, char hi, int k) {
  if (lo == hi) {
    out.printf("\"%c\"", lo);
  } else {
    out.printf("[%c-%c]", lo, hi);
  }
  if (k == 1) out.put(" [0-9]");
  if (k > 1) out.printf(" [0-9]{%d}", k);
}

// Digit strings of length n that are >= x (upper: <= x).
void bounded(GbnfWriter& out, const char* x, int n, bool upper) {
  if (n == 0) return;
  const char extreme = upper ? '9' : '0';
  bool any = true;  // x is all 0s (all 9s): every string of n digits
  for (int i = 0; i < n; ++i) any &= x[i] == extreme;
  if (any) {
    digits(out, '0', '9', n - 1);
    return;
  }
  out.printf("( \"%c\" ", x[0]);
  bounded(out, x + 1, n - 1, upper);
  if (x[0] != (upper ? '0' : '9')) {  // a first digit past x's (below it: upper), then anything
    out.put(" | ");
    if (upper) {
      digits(out, '0', static_cast<char>(x[0] - 1), n - 1);
    } else {
      digits(out, static_cast<char>(x[0] + 1), '9', n - 1);
    }
  }
  out.put(" )");
}

// Digit strings of length n between x and y (x <= y, same length).
void same_length(GbnfWriter& out, const char* x, const char* y, int n) {
  if (n == 0) return;
  if (x[0] == y[0]) {
    out.printf("\"%c\" ", x[0]);
    same_length(out, x + 1, y + 1, n - 1);
    return;
  }
  out.put("( ");
  out.printf("\"%c\" ", x[0]);
  bounded(out, x + 1, n - 1, false);
  if (x[0] + 1 <= y[0] - 1) {
    out.put(" | ");
    digits(out, static_cast<char>(x[0] + 1), static_cast<char>(y[0] - 1), n - 1);
  }
  out.printf(" | \"%c\" ", y[0]);
  bounded(out, y + 1, n - 1, true);
  out.put(" )");
}

bool bounded_all_nines(const char* s, int n) {
  for (int i = 0; i < n; ++i) {
    if (s[i] != '9') return false;
  }
  return true;
}

// Decimal numbers in [a, b] (b absent: at most kIntegerDigits digits), as a group.
void digits_range(GbnfWriter& out, uint64_t a, bool bounded, uint64_t b) {
  char as[24], bs[24];
  const int na = std::snprintf(as, sizeof as, "%llu", static_cast<unsigned long long>(a));
  int nb = kIntegerDigits;
  if (bounded) {
    nb = std::snprintf(bs, sizeof bs, "%llu", static_cast<unsigned long long>(b));
  } else {
    std::memset(bs, '9', kIntegerDigits);
    bs[kIntegerDigits] = '\0';
    if (na > kIntegerDigits) nb = na, std::memcpy(bs, as, static_cast<size_t>(na) + 1);
  }
  out.put("( ");
  bool first = true;
  for (int len = na; len <= nb;) {
    char lo[24], hi[24];
    if (len == na) {
      std::memcpy(lo, as, static_cast<size_t>(len));
    } else {
      lo[0] = '1';
      std::memset(lo + 1, '0', static_cast<size_t>(len - 1));
    }
    if (len == nb) {
      std::memcpy(hi, bs, static_cast<size_t>(len));
    } else {
      std::memset(hi, '9', static_cast<size_t>(len));
    }
    if (!first) out.put(" | ");
    first = false;
    // Every number of this many digits (and of the next lengths, while that holds): one run.
    auto full = [&](int l, const char* x, const char* y) {
      if (x[0] != (l == 1 ? '0' : '1') || y[0] != '9') return false;
      for (int i = 1; i < l; ++i) {
        if (x[i] != '0' || y[i] != '9') return false;
      }
      return l > 1;
    };
    if (full(len, lo, hi)) {
      int last = len;
      while (last + 1 < nb || (last + 1 == nb && bounded_all_nines(bs, nb))) ++last;
      if (last == len) {
        digits(out, '1', '9', len - 1);
      } else {
        out.printf("[1-9] [0-9]{%d,%d}", len - 1, last - 1);
      }
      len = last + 1;
      continue;
    }
    out.put("( ");
    same_length(out, lo, hi, len);
    out.put(" )");
    ++len;
  }
  out.put(" )");
}

}  // namespace

void write_integer_range(GbnfWriter& out, const RangeBound& lo, const RangeBound& hi) {
  bool any = false;
  // Non-negative part: [max(lo, 0), hi].
  if (!hi.present || hi.value >= 0) {
    const int64_t a = lo.present && lo.value > 0 ? lo.value : 0;
    if (!hi.present || a <= hi.value) {
      digits_range(out, static_cast<uint64_t>(a), hi.present, hi.present ? static_cast<uint64_t>(hi.value) : 0);
      any = true;
    }
  }
  // Negative part: -[max(-hi, 1), -lo].
  if (!lo.present || lo.value < 0) {
    const uint64_t a = hi.present && hi.value < -1 ? static_cast<uint64_t>(-hi.value) : 1;
    if (!lo.present || static_cast<uint64_t>(-lo.value) >= a) {
      if (any) out.put(" | ");
      out.put("\"-\" ");
      digits_range(out, a, lo.present, lo.present ? static_cast<uint64_t>(-lo.value) : 0);
    }
  }
}

void write_number_range(GbnfWriter& out, const RangeBound& lo, const RangeBound& hi, const RangeBound& min,
                        const RangeBound& max) {
  // 3.0 is the integer 3: the zero fraction follows every integer alternative, so they are
  // grouped (ungrouped, it bound to the negative ones only and refused 3.0 in [-3, 10]).
  // Exclusive bounds one apart, (1, 2), hold no integer: then only the fractions are written.
  const bool integers = !(lo.present && hi.present && lo.value > hi.value);
  if (integers) {
    out.put("( ");
    write_integer_range(out, lo, hi);
    out.put(" ) ( \".\" \"0\"{1,16} )?");
  }
  const char* separator = integers ? " | " : "";
  // Non-integers v: lo' <= floor(v) <= hi' - 1 with lo' = the minimum (inclusive or
  // exclusive alike) and hi' = the maximum (likewise). Written k.f for k >= 0, and
  // -m.f with m = -k - 1 for k < 0; f has a nonzero digit.
  const RangeBound& flo = min;
  RangeBound fhi = max;
  if (fhi.present) fhi.value -= 1;
  const char* fraction = " \".\" [0-9]{0,15} [1-9]";
  // Non-negative integer parts.
  if (!fhi.present || fhi.value >= 0) {
    const int64_t a = flo.present && flo.value > 0 ? flo.value : 0;
    if (!fhi.present || a <= fhi.value) {
      out.put(separator);
      out.put("( ");
      separator = " | ";
      digits_range(out, static_cast<uint64_t>(a), fhi.present, fhi.present ? static_cast<uint64_t>(fhi.value) : 0);
      out.put(fraction);
      out.put(" )");
    }
  }
  // Negative integer parts k in [lo', min(hi', -1)], as m = -k - 1 in [max(-hi' - 1, 0), -lo' - 1].
  if (!flo.present || flo.value < 0) {
    const int64_t k_hi = fhi.present && fhi.value < -1 ? fhi.value : -1;
    const uint64_t m_lo = static_cast<uint64_t>(-k_hi - 1);
    if (!flo.present || flo.value <= k_hi) {
      out.put(separator);
      out.put("( \"-\" ");
      digits_range(out, m_lo, flo.present, flo.present ? static_cast<uint64_t>(-flo.value - 1) : 0);
      out.put(fraction);
      out.put(" )");
    }
  }
}

}  // namespace tern
