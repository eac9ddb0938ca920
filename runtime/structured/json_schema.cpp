#include "runtime/structured/json_schema.h"

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <new>

#include "runtime/structured/gbnf_writer.h"
#include "runtime/structured/json_canonical.h"
#include "runtime/structured/json_reader.h"
#include "runtime/structured/json_rules.h"
#include "runtime/structured/json_schema_converter.h"
#include "runtime/structured/json_schema_keywords.h"
#include "runtime/structured/json_schema_kinds.h"
#include "runtime/structured/numeric_range.h"

namespace tern {

namespace json_schema_internal {

using namespace json_rules;
using json::unescape_cstr;
namespace keywords = json_schema_keywords;

Error Converter::run() {
  TERN_RETURN_IF_ERROR(check_unique_keys(root_));
  out_.put("root ::= ");
  TERN_RETURN_IF_ERROR(expression(root_, 0));
  out_.put("\n");
  for (size_t i = 0; i < n_jobs_; ++i) {  // jobs may add jobs
    const Job& job = jobs_[i];
    std::memcpy(path_, job.path, sizeof path_);
    path_size_ = std::strlen(path_);
    switch (job.kind) {
      case JobKind::Schema:
        out_.printf("ref%u ::= ", job.id);
        TERN_RETURN_IF_ERROR(expression(job.schema, 0));
        break;
      case JobKind::Items:
        out_.printf("item%u ::= ", job.id);
        TERN_RETURN_IF_ERROR(expression(job.schema, 0));
        break;
      case JobKind::KeyValue:
        out_.printf("kv%u ::= ", job.id);
        TERN_RETURN_IF_ERROR(key_value(job.key, job.schema, 0));
        break;
      case JobKind::AdditionalKeyValue:
        out_.printf("kv%u ::= ", job.id);
        TERN_RETURN_IF_ERROR(additional_key_value(job.key, job.schema, 0));
        break;
    }
    out_.put("\n");
  }
  write_used_rules(out_, used_);
  return Error::Ok;
}

Error Converter::unsupported(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  const Error e = fail_at_path(Error::UnsupportedSchema, fmt, args);
  va_end(args);
  return e;
}

Error Converter::invalid(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  const Error e = fail_at_path(Error::InvalidArgument, fmt, args);
  va_end(args);
  return e;
}

Error Converter::fail_at_path(Error code, const char* fmt, va_list args) {
  char what[256];
  std::vsnprintf(what, sizeof what, fmt, args);
  return fail(code, "JSON Schema at '%s': %s", path_size_ == 0 ? "#" : path_, what);
}

size_t Converter::push_path(const char* segment, size_t n) {
  const size_t mark = path_size_;
  if (path_size_ + n + 2 < sizeof path_) {
    path_[path_size_++] = '/';
    std::memcpy(path_ + path_size_, segment, n);
    path_size_ += n;
    path_[path_size_] = '\0';
  }
  return mark;
}

size_t Converter::push_key(const Value& key) {
  char buf[64];
  const size_t n = json::unescape(key, buf, sizeof buf);
  return push_path(buf, n < sizeof buf ? n : sizeof buf);
}

void Converter::pop_path(size_t mark) {
  path_size_ = mark;
  path_[path_size_] = '\0';
}

Result<uint32_t> Converter::add_job(JobKind kind, const Value& schema, const Value& key) {
  if (kind == JobKind::Schema) {  // one rule per $ref target
    for (size_t i = 0; i < n_jobs_; ++i) {
      if (jobs_[i].kind == kind && jobs_[i].schema.begin == schema.begin) return jobs_[i].id;
    }
  }
  if (n_jobs_ == kMaxJobs) return unsupported("more than %zu nested rules", kMaxJobs);
  Job& job = jobs_[n_jobs_];
  job.kind = kind;
  job.id = next_id_++;
  job.schema = schema;
  job.key = key;
  static_assert(sizeof job.path == sizeof path_, "a job keeps the whole path");
  std::memcpy(job.path, path_, sizeof path_);
  return jobs_[n_jobs_++].id;
}

bool Converter::is_listed(const Value& key, const char* const* list) {
  for (const char* const* a = list; *a != nullptr; ++a) {
    if (json::string_equals(key, *a)) return true;
  }
  return false;
}

// Refuses a keyword the schema's kind does not use: one in none of `allowed`'s lists (each
// null-terminated, json_schema_keywords.h), the annotations and definitions.
Error Converter::check_keywords(const Value& schema, std::initializer_list<const char* const*> allowed) {
  json::Members members(schema);
  Value key, value;
  while (members.next(&key, &value)) {
    if (is_listed(key, keywords::kAnnotations) || is_listed(key, keywords::kDefinitions)) continue;
    bool ok = false;
    for (const char* const* list : allowed) ok = ok || is_listed(key, list);
    if (!ok) {
      char name[64];
      unescape_cstr(key, name);
      return unsupported("the keyword '%s' is not supported here", name);
    }
  }
  return Error::Ok;
}

// A parenthesized GBNF expression for the values `schema` accepts, each followed by ws.
Error Converter::expression(const Value& schema, int depth) {
  if (depth > kMaxDepth) return unsupported("nested deeper than %d levels", kMaxDepth);
  if (schema.kind == Kind::Bool) {
    if (schema.begin[0] == 'f') return unsupported("the schema false matches nothing");
    used_ |= kValue;
    out_.put("value");
    return Error::Ok;
  }
  if (schema.kind != Kind::Object)
    return invalid("a schema must be an object or a boolean, not %s", json::to_string(schema.kind));
  Value v;
  if (schema.begin != root_.begin && json::find(schema, "$id", &v))  // '#/...' would resolve inside it
    return unsupported("'$id' below the root (an embedded resource changes what '$ref' resolves against)");
  if (json::find(schema, "$ref", &v)) {
    TERN_RETURN_IF_ERROR(check_keywords(schema, {keywords::kRef}));
    return reference(v);
  }
  if (json::find(schema, "const", &v)) {
    TERN_RETURN_IF_ERROR(check_keywords(schema, {keywords::kConst}));
    return enumeration(schema, v, "const");
  }
  if (json::find(schema, "enum", &v)) {
    TERN_RETURN_IF_ERROR(check_keywords(schema, {keywords::kEnum}));
    return enumeration(schema, v, "enum");
  }
  const char* alternatives = json::find(schema, "anyOf", &v)   ? "anyOf"
                             : json::find(schema, "oneOf", &v) ? "oneOf"
                                                               : nullptr;
  if (alternatives != nullptr) return any_of(schema, v, alternatives, depth);
  if (json::find(schema, "allOf", &v)) {
    TERN_RETURN_IF_ERROR(check_keywords(schema, {keywords::kAllOf}));
    return all_of(v, depth);
  }
  const std::initializer_list<const char* const*> typed_keywords = {
      keywords::kType, keywords::kString, keywords::kNumber, keywords::kArray, keywords::kObject};
  if (json::find(schema, "type", &v)) {
    TERN_RETURN_IF_ERROR(check_keywords(schema, typed_keywords));
    return types(schema, v, depth);
  }
  // No type: what the other keywords imply, or any value.
  if (const char* implied = implied_type(schema)) {
    TERN_RETURN_IF_ERROR(check_keywords(schema, typed_keywords));
    return typed_named(schema, implied, depth);
  }
  TERN_RETURN_IF_ERROR(check_keywords(schema, {}));
  used_ |= kValue;
  out_.put("value");
  return Error::Ok;
}

// "enum" (or "const", one value): the values that "type", when given beside it, admits too.
Error Converter::enumeration(const Value& schema, const Value& values, const char* which) {
  const bool list = which[0] == 'e';
  if (list && values.kind != Kind::Array) return invalid("'enum' must be an array");
  Value type;
  const bool typed = json::find(schema, "type", &type);
  if (typed && !json_type_valid(type)) return invalid("'type' must be a type name or a non-empty array of them");
  json::Items items(values);
  Value item = values;
  bool any = false;
  out_.put("( ");
  for (bool more = list ? items.next(&item) : true; more; more = list && items.next(&item)) {
    if (typed && !json_type_admits(type, item)) continue;
    out_.put(any ? " | " : "");
    any = true;
    TERN_RETURN_IF_ERROR(constant(item));
  }
  // The white space after the group, not after each value: an enum of literals alone is
  // one alternation, which the grammar compiler folds into a trie.
  out_.put(" ) ws");
  if (!any) return unsupported("'%s' %s: the schema matches nothing", which, typed ? "outside 'type'" : "empty");
  return Error::Ok;
}

// A canonical spelling's failure, reported by what was spelled.
Error Converter::spelled(CanonicalResult r, const char* what) {
  if (r == CanonicalResult::TooLong) return unsupported("%s longer than the grammar spells (2048 bytes)", what);
  if (r == CanonicalResult::LoneSurrogate) return unsupported("%s with a lone surrogate (UTF-8 cannot spell it)", what);
  return Error::Ok;
}

// "anyOf" or "oneOf" (`which`, whose array is `branches`): any of the branches.
Error Converter::any_of(const Value& schema, const Value& branches, const char* which, int depth) {
  TERN_RETURN_IF_ERROR(check_keywords(schema, {keywords::kAlternatives}));
  Value other;
  if (json::find(schema, "anyOf", &other) && json::find(schema, "oneOf", &other)) {
    return unsupported("both 'anyOf' and 'oneOf'");
  }
  if (branches.kind != Kind::Array || json::count_items(branches) == 0)
    return invalid("'%s' must be a non-empty array", which);
  if (which[0] == 'o' && !schema_branches_disjoint(root_, branches))
    return unsupported("'oneOf' whose branches may match one value (only ones of disjoint types; else 'anyOf')");
  json::Items items(branches);
  Value item;
  out_.put("( ");
  uint32_t index = 0;
  for (bool first = true; items.next(&item); first = false, ++index) {
    if (!first) out_.put(" | ");
    char segment[32];
    std::snprintf(segment, sizeof segment, "%s/%u", which, index);
    const size_t mark = push_path(segment);
    TERN_RETURN_IF_ERROR(expression(item, depth + 1));
    pop_path(mark);
  }
  out_.put(" )");
  return Error::Ok;
}

// "allOf" of a single schema: that schema (after the keywords are checked).
Error Converter::all_of(const Value& schemas, int depth) {
  if (schemas.kind != Kind::Array || json::count_items(schemas) != 1) {
    return unsupported("'allOf' with more than one schema (only a single one is supported)");
  }
  json::Items items(schemas);
  Value item;
  items.next(&item);
  const size_t mark = push_path("allOf/0");
  TERN_RETURN_IF_ERROR(expression(item, depth + 1));
  pop_path(mark);
  return Error::Ok;
}

// "type": one type's expression, or a choice among a list's (after the keywords are checked).
Error Converter::types(const Value& schema, const Value& type, int depth) {
  if (type.kind == Kind::String) return typed(schema, type, depth);
  if (type.kind != Kind::Array || json::count_items(type) == 0)
    return invalid("'type' must be a string or a non-empty array");
  json::Items items(type);
  Value t;
  out_.put("( ");
  for (bool first = true; items.next(&t); first = false) {
    if (t.kind != Kind::String) return invalid("'type' must list strings");
    if (!first) out_.put(" | ");
    TERN_RETURN_IF_ERROR(typed(schema, t, depth));
  }
  out_.put(" )");
  return Error::Ok;
}

// A "$ref" (after its keywords are checked): the target's rule, made once per target.
Error Converter::reference(const Value& ref) {
  Value target;
  TERN_RETURN_IF_ERROR(resolve(ref, &target));
  // The target's rule reports problems at the target's place.
  char here[sizeof path_];
  std::memcpy(here, path_, sizeof path_);
  const size_t here_size = path_size_;
  const size_t n = unescape_cstr(ref, path_);
  path_size_ = n < sizeof path_ - 1 ? n : sizeof path_ - 1;
  if (path_[0] == '#') std::memmove(path_, path_ + 1, path_size_--);
  auto id = add_job(JobKind::Schema, target, Value{});
  std::memcpy(path_, here, sizeof path_);
  path_size_ = here_size;
  if (!id.ok()) return id.error();
  out_.printf("ref%u", *id);
  return Error::Ok;
}

// The type a schema without "type" has from its other keywords, or null.
const char* Converter::implied_type(const Value& schema) {
  Value v;
  if (json::find(schema, "properties", &v) || json::find(schema, "required", &v) ||
      json::find(schema, "additionalProperties", &v)) {
    return "object";
  }
  if (json::find(schema, "items", &v) || json::find(schema, "minItems", &v) || json::find(schema, "maxItems", &v)) {
    return "array";
  }
  if (json::find(schema, "minLength", &v) || json::find(schema, "maxLength", &v) || json::find(schema, "format", &v)) {
    return "string";
  }
  if (json::find(schema, "minimum", &v) || json::find(schema, "maximum", &v) ||
      json::find(schema, "exclusiveMinimum", &v) || json::find(schema, "exclusiveMaximum", &v)) {
    return "number";
  }
  return nullptr;
}

Error Converter::typed(const Value& schema, const Value& type, int depth) {
  char name[16];
  unescape_cstr(type, name);
  return typed_named(schema, name, depth);
}

Error Converter::typed_named(const Value& schema, const char* type, int depth) {
  if (std::strcmp(type, "object") == 0) return object(schema, depth);
  if (std::strcmp(type, "array") == 0) return array(schema, depth);
  if (std::strcmp(type, "string") == 0) return string(schema);
  if (std::strcmp(type, "integer") == 0) return number(schema, true);
  if (std::strcmp(type, "number") == 0) return number(schema, false);
  if (std::strcmp(type, "boolean") == 0 || std::strcmp(type, "null") == 0) {
    used_ |= type[0] == 'b' ? kBoolean : kNull;
    out_.put(type[0] == 'b' ? "boolean" : "null");
    return Error::Ok;
  }
  return invalid("unknown type '%s'", type);
}

// A JSON value in its canonical spelling, then ws: strings (and names) in UTF-8 with only
// the escapes JSON requires (\" \\ \b \f \n \r \t, \u00xx for other control characters), as
// JSON.stringify and Python's json.dumps(ensure_ascii=False) write them; white space where
// every other value may have it (after each value and after [ { , :).
Error Converter::constant(const Value& v) {
  if (v.kind == Kind::Object || v.kind == Kind::Array) {
    const bool object = v.kind == Kind::Object;
    out_.put(object ? "\"{\" ws" : "\"[\" ws");
    json::Members members(v);
    json::Items items(v);
    Value key, value;
    for (bool first = true; object ? members.next(&key, &value) : items.next(&value); first = false) {
      out_.put(first ? " " : " \",\" ws ");
      if (object) {
        CanonicalJson c;
        TERN_RETURN_IF_ERROR(spelled(canonical_json_string(key, &c), "a constant's name"));
        out_.literal(c.buf, c.n);
        out_.put(" ws \":\" ws ");
      }
      TERN_RETURN_IF_ERROR(constant(value));
      out_.put(" ws");
    }
    out_.put(object ? " \"}\"" : " \"]\"");
    return Error::Ok;
  }
  CanonicalJson c;
  TERN_RETURN_IF_ERROR(spelled(canonical_json(v, &c), "a constant"));
  out_.literal(c.buf, c.n);
  return Error::Ok;
}

Error Converter::resolve(const Value& ref, Value* out) {
  char text[256];
  const size_t n = unescape_cstr(ref, text);
  if (ref.kind != Kind::String || n >= sizeof text - 1) return invalid("'$ref' must be a string (at most 255 bytes)");
  if (text[0] != '#') return unsupported("'$ref' to another document ('%s'); only '#...' pointers", text);
  if (text[1] != '\0' && text[1] != '/') {
    return unsupported("'$ref' anchor '%s'; only JSON pointers ('#/$defs/name')", text);
  }
  // A URI fragment: percent-decoded before it is read as a JSON pointer (RFC 6901, section 6).
  char pointer[sizeof text];
  if (!json::percent_decode(text + 1, pointer)) return invalid("'$ref' '%s': a bad percent-escape", text);
  if (!json::at_pointer(root_, pointer, out)) return invalid("'$ref' '%s' points at nothing", text);
  return Error::Ok;
}

Error Converter::string(const Value& schema) {
  Value v;
  if (json::find(schema, "format", &v)) {
    Value other;
    if (json::find(schema, "minLength", &other) || json::find(schema, "maxLength", &other)) {
      return unsupported("'format' together with 'minLength' or 'maxLength'");
    }
    const struct {
      const char* name;
      uint32_t bit;
    } formats[] = {{"date", kDate}, {"time", kTime}, {"date-time", kDateTime}, {"uuid", kUuid}};
    for (const auto& f : formats) {
      if (json::string_equals(v, f.name)) {
        used_ |= f.bit | kWs;
        out_.put(f.name);
        return Error::Ok;
      }
    }
    char name[64];
    unescape_cstr(v, name);
    return unsupported("'format' '%s' (supported: date, time, date-time, uuid)", name);
  }
  int64_t min = 0, max = -1;
  TERN_RETURN_IF_ERROR(count(schema, "minLength", &min));
  TERN_RETURN_IF_ERROR(count(schema, "maxLength", &max));
  if (min == 0 && max < 0) {
    used_ |= kString;
    out_.put("string");
    return Error::Ok;
  }
  if (max >= 0 && max < min)
    return invalid("'maxLength' %lld is below 'minLength' %lld", static_cast<long long>(max),
                   static_cast<long long>(min));
  if (min > 65535 || max > 65535) return unsupported("string lengths above 65535");
  used_ |= kWs;
  out_.put("\"\\\"\" " TERN_JSON_CHAR);
  if (max < 0) {
    out_.printf("{%lld,}", static_cast<long long>(min));
  } else {
    out_.printf("{%lld,%lld}", static_cast<long long>(min), static_cast<long long>(max));
  }
  out_.put(" \"\\\"\" ws");
  return Error::Ok;
}

// A non-negative integer keyword (absent: *out unchanged).
Error Converter::count(const Value& schema, const char* key, int64_t* out) {
  Value v;
  if (!json::find(schema, key, &v)) return Error::Ok;
  int64_t n = 0;
  if (!json::as_int64(v, &n) || n < 0) return invalid("'%s' must be a non-negative integer", key);
  *out = n;
  return Error::Ok;
}

// A bound of a range: absent, or an integer (numbers round inward for integer types).
Error Converter::bound(const Value& schema, const char* key, bool integer, bool lower, bool exclusive,
                       RangeBound* out) {
  Value v;
  if (!json::find(schema, key, &v)) return Error::Ok;
  if (v.kind != Kind::Number) return invalid("'%s' must be a number", key);
  // Read exactly from the digits: through a double, 2.99999999999999999999 became 3.
  int64_t n = 0;
  bool whole = false;
  if (!json::floor_exact(v, &n, &whole)) return unsupported("'%s' is out of range", key);
  if (!whole) {
    if (!integer) return unsupported("'%s' is not an integer: number ranges need integer bounds", key);
    if (lower) ++n;  // the nearest integer inside the bound: its ceiling
    exclusive = false;
  }
  if (n < -999999999999999LL || n > 999999999999999LL) return unsupported("'%s' has more than 15 digits", key);
  if (exclusive) n += lower ? 1 : -1;
  if (out->present) {  // minimum and exclusiveMinimum both: the tighter one
    n = lower ? (n > out->value ? n : out->value) : (n < out->value ? n : out->value);
  }
  out->present = true;
  out->value = n;
  return Error::Ok;
}

Error Converter::number(const Value& schema, bool integer) {
  // Integer bounds of the value: lo <= v <= hi for integers. Non-integers lie between the
  // bounds as written (below).
  RangeBound lo, hi;
  TERN_RETURN_IF_ERROR(bound(schema, "minimum", integer, true, false, &lo));
  TERN_RETURN_IF_ERROR(bound(schema, "exclusiveMinimum", integer, true, true, &lo));
  TERN_RETURN_IF_ERROR(bound(schema, "maximum", integer, false, false, &hi));
  TERN_RETURN_IF_ERROR(bound(schema, "exclusiveMaximum", integer, false, true, &hi));
  if (!lo.present && !hi.present) {
    used_ |= integer ? kInteger : kNumber;
    out_.put(integer ? "integer" : "number");
    return Error::Ok;
  }
  const bool no_integer = lo.present && hi.present && lo.value > hi.value;
  if (no_integer && integer) return unsupported("an empty range (minimum above maximum)");
  used_ |= kWs;
  out_.put("( ");
  if (integer) {
    write_integer_range(out_, lo, hi);
  } else {
    // The bounds as written, inclusive or exclusive alike: non-integers lie between them.
    RangeBound min, max;
    TERN_RETURN_IF_ERROR(bound(schema, "minimum", false, true, false, &min));
    TERN_RETURN_IF_ERROR(bound(schema, "exclusiveMinimum", false, true, false, &min));
    TERN_RETURN_IF_ERROR(bound(schema, "maximum", false, false, false, &max));
    TERN_RETURN_IF_ERROR(bound(schema, "exclusiveMaximum", false, false, false, &max));
    if (no_integer && min.value >= max.value) return unsupported("an empty range (minimum above maximum)");
    write_number_range(out_, lo, hi, min, max);
  }
  out_.put(" ) ws");
  return Error::Ok;
}

}  // namespace json_schema_internal

size_t json_schema_work_bytes() {
  return sizeof(json_schema_internal::Converter) + alignof(json_schema_internal::Converter);
}

Error json_schema_to_grammar(const char* schema, size_t size, char* out, size_t capacity, size_t* out_size, void* work,
                             size_t work_bytes) {
  TERN_CHECK_OR_RETURN(out_size != nullptr, Error::InvalidArgument, "json_schema_to_grammar: null out_size");
  *out_size = 0;
  TERN_CHECK_OR_RETURN(out != nullptr || capacity == 0, Error::InvalidArgument, "json_schema_to_grammar: null buffer");
  TERN_CHECK_OR_RETURN(work != nullptr && work_bytes >= json_schema_work_bytes(), Error::Internal,
                       "json_schema_to_grammar: %zu bytes of working memory (it needs %zu)", work_bytes,
                       json_schema_work_bytes());
  TERN_ASSIGN_OR_RETURN(const json::Value root, json::parse(schema, size));
  GbnfWriter text(out, capacity);
  void* at = work;
  size_t room = work_bytes;
  using json_schema_internal::Converter;
  at = std::align(alignof(Converter), sizeof(Converter), at, room);
  Converter* converter = new (at) Converter(root, text);
  const Error e = converter->run();
  converter->~Converter();
  TERN_RETURN_IF_ERROR(e);
  text.finish();
  *out_size = text.size();
  TERN_CHECK_OR_RETURN(text.size() < capacity, Error::OutOfRange,
                       "the grammar needs %zu bytes (and a NUL); the buffer has %zu", text.size(), capacity);
  return Error::Ok;
}

Error json_schema_to_grammar(const char* schema, size_t size, char* out, size_t capacity, size_t* out_size) {
  // The converter's tables (~0.5 MB) are too large for a thread's stack: one heap block
  // while it runs (a setup step, like tern_plan, never during generation).
  const size_t bytes = json_schema_work_bytes();
  std::unique_ptr<char[]> work(new (std::nothrow) char[bytes]);
  if (out_size != nullptr) *out_size = 0;
  TERN_CHECK_OR_RETURN(work != nullptr, Error::OutOfMemory, "json_schema_to_grammar: no memory for its tables");
  return json_schema_to_grammar(schema, size, out, capacity, out_size, work.get(), bytes);
}

}  // namespace tern
