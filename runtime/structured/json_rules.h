// The JSON rules converted schemas share (ws, string, number, integer, boolean, null, any
// value, the date, time and uuid formats), each written once at the end of a grammar using it.
#pragma once

#include <cstdint>

#include "runtime/structured/gbnf_writer.h"

namespace tern::json_rules {

// The shared rules, as bits of the set a grammar uses. `ws` and the string's character loop
// are small enough that the grammar compiler copies them into the rules using them.
enum Primitive : uint32_t {
  kWs = 1u << 0,
  kString = 1u << 1,
  kNumber = 1u << 2,
  kInteger = 1u << 3,
  kBoolean = 1u << 4,
  kNull = 1u << 5,
  kValue = 1u << 6,  // any JSON value (with kObject, kArray and the scalars)
  kDate = 1u << 7,
  kTime = 1u << 8,
  kDateTime = 1u << 9,
  kUuid = 1u << 10,
};

// One character of a JSON string: anything but a quote, a backslash or a control character
// (DEL included), or an escape (\u with four hex digits; surrogates only as a valid pair).
#define TERN_JSON_CHAR                                                                                    \
  "( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | " \
  "[dD] [0-7] [0-9a-fA-F]{2} | [dD] [89abAB] [0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2} ) ) )"

// The rules of the `used` primitives and those they call (any value: every scalar; ws always).
void write_used_rules(GbnfWriter& out, uint32_t used);

}  // namespace tern::json_rules
