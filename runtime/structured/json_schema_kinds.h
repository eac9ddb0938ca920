// Which kinds of JSON value a schema can validate, by JSON Schema's meaning (not by what a
// grammar spells: {"minimum": 3} validates every string too). "oneOf" is exact only when no
// value can match two branches; disjoint kinds prove that.
#pragma once

#include <cstdint>

#include "runtime/structured/json_reader.h"

namespace tern {

// Bits of the kinds: null, boolean, string, array, object, whole numbers, other numbers.
uint8_t schema_kinds(const json::Value& root, const json::Value& schema);

// Whether no two of the array's schemas can validate one value (their kinds are disjoint).
bool schema_branches_disjoint(const json::Value& root, const json::Value& branches);

}  // namespace tern
