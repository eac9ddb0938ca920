// The JSON Schema -> GBNF converter's inside, shared by its files: json_schema.cpp (the
// dispatch over keywords, constants, $ref, strings, numbers) and json_schema_objects.cpp (arrays
// and objects). Only json_schema.h is the interface.
#pragma once

#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "platform/error.h"
#include "runtime/structured/excluded_keys.h"
#include "runtime/structured/gbnf_writer.h"
#include "runtime/structured/json_canonical.h"
#include "runtime/structured/json_reader.h"
#include "runtime/structured/numeric_range.h"

namespace tern::json_schema_internal {

using json::Kind;
using json::Value;

constexpr size_t kMaxJobs = 1024;
constexpr size_t kPropertyPool = 4096;  // properties of the objects being written, nested ones included
constexpr int kMaxDepth = 64;

enum class JobKind : uint8_t { Schema, Items, KeyValue, AdditionalKeyValue };

// A rule to write after the current one: a schema's expression under a generated name.
struct Job {
  JobKind kind;
  uint32_t id;
  Value schema;    // the schema (Items: the item schema; KeyValue: the property's schema)
  Value key;       // KeyValue: the key; AdditionalKeyValue: the object (its listed keys are excluded)
  char path[160];  // where in the document, for messages
};

// Writes the grammar of the document `root` to `out`: run() once.
class Converter {
 public:
  Converter(const Value& root, GbnfWriter& out) : root_(root), out_(out) {}
  Error run();

 private:
  // ---- Messages name where in the schema they are ----

  Error unsupported(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  Error invalid(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  Error fail_at_path(Error code, const char* fmt, va_list args) __attribute__((format(printf, 3, 0)));
  size_t push_path(const char* segment, size_t n);
  size_t push_path(const char* segment) { return push_path(segment, std::strlen(segment)); }
  size_t push_key(const Value& key);
  void pop_path(size_t mark);
  Result<uint32_t> add_job(JobKind kind, const Value& schema, const Value& key);

  // ---- Schemas ----

  static bool is_listed(const Value& key, const char* const* list);
  // Refuses a keyword the schema's kind does not use: one in none of `allowed`'s lists (each
  // null-terminated, json_schema_keywords.h), the annotations and definitions.
  Error check_keywords(const Value& schema, std::initializer_list<const char* const*> allowed);
  // A parenthesized GBNF expression for the values `schema` accepts, each followed by ws.
  Error expression(const Value& schema, int depth);
  // "enum" (or "const", one value): the values that "type", when given beside it, admits too.
  Error enumeration(const Value& schema, const Value& values, const char* which);
  // A canonical spelling's failure, reported by what was spelled.
  Error spelled(CanonicalResult r, const char* what);
  // "anyOf" or "oneOf" (`which`, whose array is `branches`): any of the branches.
  Error any_of(const Value& schema, const Value& branches, const char* which, int depth);
  // "allOf" of a single schema: that schema (after the keywords are checked).
  Error all_of(const Value& schemas, int depth);
  // "type": one type's expression, or a choice among a list's (after the keywords are checked).
  Error types(const Value& schema, const Value& type, int depth);
  // A "$ref" (after its keywords are checked): the target's rule, made once per target.
  Error reference(const Value& ref);
  // The type a schema without "type" has from its other keywords, or null.
  static const char* implied_type(const Value& schema);
  Error typed(const Value& schema, const Value& type, int depth);
  Error typed_named(const Value& schema, const char* type, int depth);
  // A JSON value in its canonical spelling, then ws: strings (and names) in UTF-8 with only
  // the escapes JSON requires (\" \\ \b \f \n \r \t, \u00xx for other control characters), as
  // JSON.stringify and Python's json.dumps(ensure_ascii=False) write them; white space where
  // every other value may have it (after each value inside it and after [ { , :); the caller
  // writes the white space after it.
  Error constant(const Value& v);

  // ---- $ref: a JSON pointer into the document ----

  Error resolve(const Value& ref, Value* out);

  // ---- Strings ----

  Error string(const Value& schema);
  // A non-negative integer keyword (absent: *out unchanged).
  Error count(const Value& schema, const char* key, int64_t* out);

  // ---- Numbers ----

  // A bound of a range: absent, or an integer (numbers round inward for integer types).
  Error bound(const Value& schema, const char* key, bool integer, bool lower, bool exclusive, RangeBound* out);
  Error number(const Value& schema, bool integer);

  // ---- Arrays ----

  Error array(const Value& schema, int depth);

  // ---- Objects ----

  struct Property {
    Value key;
    Value schema;
    bool required;
  };
  Error object(const Value& schema, int depth);
  Error object_body(const Value& schema, const Property* props, size_t n, bool extra, const Value& extra_schema,
                    int depth);
  // Refuses a key written twice in one object anywhere in `v` (JSON readers differ on which
  // one counts; the grammar could follow the other).
  Error check_unique_keys(const Value& v);

  // "key" ws ":" ws value
  Error key_value(const Value& key, const Value& schema, int depth);
  // A key not listed in `object`'s properties, then its value. The key has no escapes (so
  // a listed name cannot be spelled another way).
  Error additional_key_value(const Value& object, const Value& schema, int depth);

  Value root_;
  GbnfWriter& out_;
  uint32_t used_ = 0;
  Property props_[kPropertyPool];
  size_t props_top_ = 0;
  uint32_t kv_ids_[kPropertyPool];
  ExcludedKeys excluded_;
  Value keys_[kPropertyPool];  // check_unique_keys: one object's keys
  Job jobs_[kMaxJobs];
  size_t n_jobs_ = 0;
  uint32_t next_id_ = 0;
  char path_[160] = "";
  size_t path_size_ = 0;
};

}  // namespace tern::json_schema_internal
