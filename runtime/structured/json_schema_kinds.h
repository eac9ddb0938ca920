// Which kinds of JSON value a schema can validate, by JSON Schema's meaning (not by what a
// grammar spells: {"minimum": 3} validates every string too). "oneOf" is exact only when no
// value can match two branches; disjoint kinds prove that. Also what "type" admits of a value,
// for "const" and "enum" beside "type": one table of the type names serves both.
#pragma once

#include <cstdint>

#include "runtime/structured/json_reader.h"

namespace tern {

// Bits of the kinds: null, boolean, string, array, object, whole numbers, other numbers.
uint8_t schema_kinds(const json::Value& root, const json::Value& schema);

// Whether no two of the array's schemas can validate one value (their kinds are disjoint).
bool schema_branches_disjoint(const json::Value& root, const json::Value& branches);

// Whether a JSON Schema type name ("integer": a number whose value is whole, 2.0 and 1e3
// included) admits the value. `type` is a name string or an array of them; false for
// anything else (the caller reports the malformed "type").
bool json_type_admits(const json::Value& type, const json::Value& v);
// Whether `type` is a type name or a non-empty array of type names.
bool json_type_valid(const json::Value& type);

}  // namespace tern
