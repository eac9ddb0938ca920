// The numeric range generator against brute force: each generated grammar is compiled by the
// library's own grammar engine (over a vocabulary of the 256 single bytes), and every number
// in a window around the bounds must be accepted exactly when the arithmetic says it is in the
// range. Also through JSON Schema, for the exclusive and fractional bounds it turns into
// integer ones.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/structured/gbnf_writer.h"
#include "runtime/structured/grammar.h"
#include "runtime/structured/json_schema.h"
#include "runtime/structured/numeric_range.h"
#include "tests/support/byte_vocab.h"
#include "tests/support/schema_convert.h"

namespace tern {
namespace {

using Opt = std::optional<int64_t>;
constexpr int64_t kTen12 = 1000000000000LL;
constexpr int64_t kTen15 = 1000000000000000LL;

class NumericRange : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    vocab_ = new testing::ByteVocab();
    ASSERT_EQ(vocab_->build(), Error::Ok) << last_error_message();
  }
  static void TearDownTestSuite() { delete vocab_; }
  void SetUp() override { region_.reset(new uint8_t[kRegionBytes]); }

  // Compiles `root ::= <expression>`.
  void compile(const std::string& expression) {
    text_ = "root ::= " + expression + "\n";
    ASSERT_EQ(grammar_.compile(text_.data(), text_.size(), vocab_->vocab(), region_.get(), kRegionBytes), Error::Ok)
        << last_error_message() << "\n"
        << text_;
  }
  // Compiles the grammar a JSON Schema converts to.
  void compile_schema(const std::string& schema) {
    ASSERT_EQ(testing::convert_schema(schema, &text_), Error::Ok) << text_;
    ASSERT_EQ(grammar_.compile(text_.data(), text_.size(), vocab_->vocab(), region_.get(), kRegionBytes), Error::Ok)
        << last_error_message() << "\n"
        << text_;
  }
  bool accepts(const std::string& s) {
    grammar_.restart();
    auto all = grammar_.accept_bytes(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    EXPECT_TRUE(all.ok()) << last_error_message();
    return all.ok() && *all && grammar_.accepting();
  }

  static constexpr size_t kRegionBytes = size_t{32} << 20;
  static testing::ByteVocab* vocab_;
  std::unique_ptr<uint8_t[]> region_;
  Grammar grammar_;
  std::string text_;
};

testing::ByteVocab* NumericRange::vocab_ = nullptr;

RangeBound bound(Opt v) {
  RangeBound b;
  if (v) b.present = true, b.value = *v;
  return b;
}

std::string expression(void (*write)(GbnfWriter&, const RangeBound&, const RangeBound&), Opt lo, Opt hi) {
  std::vector<char> buf(1 << 20);
  GbnfWriter out(buf.data(), buf.size());
  write(out, bound(lo), bound(hi));
  out.finish();
  EXPECT_LT(out.size(), buf.size());
  return "( " + std::string(buf.data(), out.size()) + " )";
}

std::string number_expression(Opt lo, Opt hi, Opt min, Opt max) {
  std::vector<char> buf(1 << 20);
  GbnfWriter out(buf.data(), buf.size());
  write_number_range(out, bound(lo), bound(hi), bound(min), bound(max));
  out.finish();
  EXPECT_LT(out.size(), buf.size());
  return "( " + std::string(buf.data(), out.size()) + " )";
}

std::string decimal(int64_t v) { return std::to_string(v); }

int digits_of(int64_t v) { return static_cast<int>(std::to_string(v < 0 ? -v : v).size()); }

// The integers to try: a window around each bound and around 0, and far ones.
std::vector<int64_t> window(Opt lo, Opt hi) {
  std::vector<int64_t> out;
  auto around = [&](int64_t c, int64_t r) {
    for (int64_t v = c - r; v <= c + r; ++v) out.push_back(v);
  };
  around(0, 12);
  if (lo) around(*lo, 12);
  if (hi) around(*hi, 12);
  for (int64_t p = 10; p <= kTen15 * 10; p *= 10) {  // each length's edges: 9 10 11, 99 100 101, ...
    for (int64_t s : {1, -1}) {
      for (int64_t d = -2; d <= 1; ++d) out.push_back(s * (p + d));
    }
  }
  for (int64_t s : {1, -1}) {
    out.push_back(s * 9999999999999999LL);   // 16 digits: the most an open side allows
    out.push_back(s * 10000000000000000LL);  // 17 digits
  }
  return out;
}

// An open side allows up to 16 digits (the generator's documented limit).
bool in_integer_range(int64_t v, Opt lo, Opt hi) {
  return (!lo || v >= *lo) && (!hi || v <= *hi) && digits_of(v) <= kIntegerDigits;
}

struct IntegerCase {
  Opt lo, hi;
};

TEST_F(NumericRange, IntegersAgainstArithmetic) {
  const IntegerCase cases[] = {
      {18, 120},
      {-40, -3},
      {0, 0},
      {5, 5},
      {-7, -7},
      {-999, 12345},
      {-1, 1},
      {0, 9},
      {10, 99},
      {9, 10},
      {99, 100},
      {1, 1000},
      {-1000, -1},
      {-100, 100},
      {1000000, 1999999},
      {-19, -11},
      {123, 4567},
      {-4567, -123},
      {1009, 1090},
      {0, 999999},
      {123456789012LL, 999999999999LL},
      {-kTen12, kTen12},
      {kTen12, kTen12 + 5},
      {-kTen12 - 7, -kTen12 + 3},
      {kTen15 - 1 - 20, kTen15 - 1},
      {-(kTen15 - 1), -(kTen15 - 50)},
      {7, std::nullopt},
      {std::nullopt, -7},
      {std::nullopt, 0},
      {0, std::nullopt},
      {-5, std::nullopt},
      {std::nullopt, 25},
      {kTen12, std::nullopt},
      {std::nullopt, -kTen12},
      {std::nullopt, std::nullopt},
  };
  for (const IntegerCase& c : cases) {
    compile(expression(write_integer_range, c.lo, c.hi));
    for (int64_t v : window(c.lo, c.hi)) {
      EXPECT_EQ(accepts(decimal(v)), in_integer_range(v, c.lo, c.hi))
          << decimal(v) << " in [" << (c.lo ? decimal(*c.lo) : "open") << ", " << (c.hi ? decimal(*c.hi) : "open")
          << "]\n"
          << text_;
    }
    // Only the canonical spelling: no sign on positives, no leading zeros, no "-0", no space.
    for (const char* s : {"", "-", "+5", "05", "-05", "00", "-0", " 5", "5 ", "5.0", "1e1"}) {
      EXPECT_FALSE(accepts(s)) << "'" << s << "'\n" << text_;
    }
  }
}

// A decimal: sign, integer part and fraction digits (no trailing zero unless all are zeros).
struct Decimal {
  bool negative;
  int64_t whole;
  std::string fraction;  // may be empty
  std::string text() const { return (negative ? "-" : "") + decimal(whole) + (fraction.empty() ? "" : "." + fraction); }
  // Sign of (this - b), exactly.
  int compare(int64_t b) const {
    const bool fractional = fraction.find_first_not_of('0') != std::string::npos;
    if (!negative) {
      if (whole != b) return whole < b ? -1 : 1;
      return fractional ? 1 : 0;
    }
    // -(whole + f): below -whole when fractional.
    if (-whole != b) return -whole < b ? -1 : 1;
    return fractional ? -1 : 0;
  }
};

struct NumberCase {
  Opt min, max;
  bool min_exclusive, max_exclusive;
};

TEST_F(NumericRange, NumbersAgainstArithmetic) {
  const NumberCase cases[] = {
      {0, 1, false, false},
      {-3, 10, false, true},
      {-1, 1, true, true},
      {100, std::nullopt, false, false},
      {std::nullopt, -5, false, false},
      {2, 5, true, true},
      {-kTen12, kTen12, false, false},
      {-20, -10, true, false},
      {7, 7, false, false},
      {0, 0, false, false},
      {-1, 0, false, false},
      {std::nullopt, 3, false, true},
      {-3, std::nullopt, true, false},
      {99, 1001, true, true},
      {-1001, -99, true, true},
      {1, 2, true, true},  // no integer inside: only 1.x
      {-2, -1, true, true},
      {0, 1, true, true},
  };
  for (const NumberCase& c : cases) {
    // The inclusive integer bounds, as JSON Schema's conversion makes them.
    const Opt lo = c.min ? Opt(*c.min + (c.min_exclusive ? 1 : 0)) : std::nullopt;
    const Opt hi = c.max ? Opt(*c.max - (c.max_exclusive ? 1 : 0)) : std::nullopt;
    // No value at all inside (JSON Schema refuses the range); with none but non-integers, as
    // (1, 2), only their fractions are written.
    if (lo && hi && *lo > *hi && !(*c.min < *c.max)) continue;
    compile(number_expression(lo, hi, c.min, c.max));
    auto expected = [&](const Decimal& d) {
      const int below = c.min ? d.compare(*c.min) : 1, above = c.max ? d.compare(*c.max) : -1;
      return (below > 0 || (below == 0 && !c.min_exclusive)) && (above < 0 || (above == 0 && !c.max_exclusive));
    };
    std::vector<int64_t> wholes;
    for (int64_t v = -3; v <= 3; ++v) wholes.push_back(v);
    for (Opt b : {c.min, c.max}) {
      if (!b) continue;
      for (int64_t v = *b - 3; v <= *b + 3; ++v) wholes.push_back(v < 0 ? -v : v);
    }
    wholes.push_back(kTen15);
    for (int64_t w : wholes) {
      if (w < 0) continue;
      for (bool negative : {false, true}) {
        for (const char* f :
             {"", "0", "000", "5", "25", "001", "9999", "0000000000000001", "9999999999999999", "1000000000000001"}) {
          const Decimal d{negative, w, f};
          if (negative && w == 0 && d.compare(0) == 0) continue;  // "-0", "-0.0": not written
          const bool accepted = accepts(d.text());
          const std::string what = d.text() + " in " + (c.min_exclusive ? "(" : "[") +
                                   (c.min ? decimal(*c.min) : "open") + ", " + (c.max ? decimal(*c.max) : "open") +
                                   (c.max_exclusive ? ")" : "]") + "\n" + text_;
          EXPECT_EQ(accepted, expected(d)) << what;
        }
      }
    }
    // Outside the generator's spelling: 17 fraction digits, trailing zeros after a nonzero
    // digit, no digits after the point, exponents.
    for (const char* s : {"0.00000000000000001", "0.50", "1.", ".5", "1e0", "-0"}) {
      EXPECT_FALSE(accepts(s)) << s << "\n" << text_;
    }
  }
}

// Through JSON Schema: exclusive bounds, both kinds of a bound, fractional bounds of integers.
TEST_F(NumericRange, SchemaBoundsAgainstArithmetic) {
  struct SchemaCase {
    const char* schema;
    bool (*in_range)(int64_t);
  };
  const SchemaCase cases[] = {
      {R"({"type": "integer", "exclusiveMinimum": -3, "exclusiveMaximum": 12})",
       [](int64_t v) { return v > -3 && v < 12; }},
      {R"({"type": "integer", "minimum": 2.5, "maximum": 7.5})", [](int64_t v) { return v >= 3 && v <= 7; }},
      {R"({"type": "integer", "minimum": -2.5, "exclusiveMaximum": 3})", [](int64_t v) { return v >= -2 && v < 3; }},
      {R"({"type": "integer", "minimum": 5, "exclusiveMinimum": 5, "maximum": 9})",
       [](int64_t v) { return v > 5 && v <= 9; }},
      {R"({"type": "integer", "minimum": 5, "exclusiveMinimum": 2, "exclusiveMaximum": 9, "maximum": 6})",
       [](int64_t v) { return v >= 5 && v <= 6; }},
      {R"({"type": "integer", "exclusiveMaximum": -1000000000000})", [](int64_t v) { return v < -kTen12; }},
      {R"({"type": "integer", "exclusiveMinimum": 999999999999})", [](int64_t v) { return v > kTen12 - 1; }},
      {R"({"type": "number", "exclusiveMinimum": -1, "maximum": 1})", [](int64_t v) { return v > -1 && v <= 1; }},
      // Bounds read exactly from their digits: through a double, 1e-400 was 0 and
      // 2.99999999999999999999 was 3.
      {R"({"type": "integer", "exclusiveMinimum": 1e-400, "maximum": 5})", [](int64_t v) { return v >= 1 && v <= 5; }},
      {R"({"type": "integer", "minimum": -1e-400, "maximum": 5})", [](int64_t v) { return v >= 0 && v <= 5; }},
      {R"({"type": "integer", "minimum": 0, "exclusiveMaximum": 2.99999999999999999999})",
       [](int64_t v) { return v >= 0 && v <= 2; }},
      {R"({"type": "integer", "minimum": -3.00000000000000000001, "maximum": -1.5})",
       [](int64_t v) { return v >= -3 && v <= -2; }},
      {R"({"type": "integer", "minimum": 25e-1, "maximum": 7.50e0})", [](int64_t v) { return v >= 3 && v <= 7; }},
      {R"({"type": "integer", "minimum": 0.3e1, "exclusiveMaximum": 1.2e1})",
       [](int64_t v) { return v >= 3 && v < 12; }},
  };
  for (const SchemaCase& c : cases) {
    compile_schema(c.schema);
    if (HasFatalFailure()) return;
    std::vector<int64_t> values;
    for (int64_t v = -30; v <= 30; ++v) values.push_back(v);
    for (int64_t v = -3; v <= 3; ++v) values.push_back(kTen12 + v), values.push_back(-kTen12 + v);
    for (int64_t v : values) {
      EXPECT_EQ(accepts(decimal(v)), c.in_range(v) && digits_of(v) <= kIntegerDigits) << v << " for " << c.schema;
    }
  }
}

// Exclusive bounds one apart hold no integer but every number between them; bounds that
// hold nothing are refused by name.
TEST_F(NumericRange, SchemaNumbersWithoutIntegers) {
  compile_schema(R"({"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 2})");
  if (HasFatalFailure()) return;
  for (const char* inside : {"1.5", "1.0001", "1.9999999999999999"}) EXPECT_TRUE(accepts(inside)) << inside;
  for (const char* outside : {"1", "2", "1.0", "2.0", "0.5", "2.5", "-1.5"}) EXPECT_FALSE(accepts(outside)) << outside;
  for (const char* empty : {R"({"type": "number", "exclusiveMinimum": 1, "maximum": 1})",
                            R"({"type": "number", "minimum": 2, "exclusiveMaximum": 2})",
                            R"({"type": "integer", "exclusiveMinimum": 1, "exclusiveMaximum": 2})"}) {
    std::string message;
    EXPECT_EQ(testing::convert_schema(empty, &message), Error::UnsupportedSchema) << empty;
    EXPECT_NE(message.find("empty range"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace tern
