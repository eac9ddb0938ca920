// Which keywords each kind of JSON Schema may carry, as the converter accepts them: a keyword
// outside its schema's lists is refused by name, so nothing a schema says is silently dropped.
// Each list ends with nullptr.
#pragma once

namespace tern::json_schema_keywords {

// Keywords that only describe: allowed anywhere and ignored.
inline const char* const kAnnotations[] = {"title", "description", "default",  "examples",  "$comment", "$schema",
                                           "$id",   "deprecated",  "readOnly", "writeOnly", "$anchor",  nullptr};
// Definitions a schema holds for references: allowed in every kind of schema.
inline const char* const kDefinitions[] = {"$defs", "definitions", nullptr};

inline const char* const kRef[] = {"$ref", nullptr};
inline const char* const kConst[] = {"const", "type", nullptr};
inline const char* const kEnum[] = {"enum", "type", nullptr};
inline const char* const kAlternatives[] = {"anyOf", "oneOf", nullptr};
inline const char* const kAllOf[] = {"allOf", nullptr};

// Typed schemas: each type reads its own keywords; the others' are vacuous for it (as JSON
// Schema has it), so a typed schema may carry all of these.
inline const char* const kType[] = {"type", nullptr};
inline const char* const kString[] = {"minLength", "maxLength", "format", nullptr};
inline const char* const kNumber[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", nullptr};
inline const char* const kArray[] = {"items", "minItems", "maxItems", nullptr};
inline const char* const kObject[] = {"properties", "required", "additionalProperties", nullptr};

}  // namespace tern::json_schema_keywords
