// JSON Schema -> GBNF, on the device: the text goes to the caller's buffer, no exceptions.
// The grammar's root matches the JSON texts that validate against the schema.
//
// Supported: type (one or a list), properties / required / additionalProperties (false, a
// schema, or absent/true: other keys with any value), enum, const, arrays with items /
// minItems / maxItems, nesting, anyOf, oneOf whose branches cannot match one value (disjoint
// kinds; else refused), allOf with a single schema, $ref to any JSON pointer in the document
// ("#/$defs/x", "#/definitions/x", "#"; recursion allowed), minLength / maxLength, integer
// ranges (minimum, maximum, exclusiveMinimum, exclusiveMaximum), number ranges with integer
// bounds, and the formats date, time, date-time and uuid. Annotations (title, description,
// default, examples, $comment, $schema, $id, deprecated, readOnly, writeOnly) are ignored.
// Any other keyword is refused with UnsupportedSchema naming it and where it is, and so is a
// key written twice in one object (JSON readers differ on which one counts).
//
// Layout: properties in the schema's order; white space after every value (none, a space,
// or a newline with up to 20 spaces or tabs); integers of at most 16 digits, number
// fractions of at most 16 digits and exponents of at most 3 digits.
#pragma once

#include <cstddef>

#include "platform/error.h"

namespace tern {

// Writes the grammar (NUL-terminated) into out[0, capacity); *out_size is its length
// without the NUL. OutOfRange when capacity is too small (call again with *out_size + 1).
// InvalidArgument for text that is not JSON or not a schema, UnsupportedSchema for what
// the grammar cannot express.
// Its tables (~0.5 MB) come from one heap block while it runs.
Error json_schema_to_grammar(const char* schema, size_t size, char* out, size_t capacity, size_t* out_size);
// The same with the tables in `work` (json_schema_work_bytes() of them): no heap use.
Error json_schema_to_grammar(const char* schema, size_t size, char* out, size_t capacity, size_t* out_size, void* work,
                             size_t work_bytes);
size_t json_schema_work_bytes();

}  // namespace tern
