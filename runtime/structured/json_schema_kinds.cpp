#include "runtime/structured/json_schema_kinds.h"

#include <cstring>

namespace tern {

using json::Kind;
using json::Value;

namespace {

constexpr uint8_t kNull = 1, kBoolean = 2, kString = 4, kArray = 8, kObject = 16, kWhole = 32, kFraction = 64;
constexpr uint8_t kAll = 127;
constexpr int kMaxDepth = 16;  // through $refs and nested alternatives; past it, any kind

uint8_t value_kind(const Value& v) {
  switch (v.kind) {
    case Kind::Null: return kNull;
    case Kind::Bool: return kBoolean;
    case Kind::String: return kString;
    case Kind::Array: return kArray;
    case Kind::Object: return kObject;
    case Kind::Number: return json::is_whole(v) ? kWhole : kFraction;
  }
  return kAll;
}

// The kinds a type name stands for; 0 for a string that is no type name.
uint8_t name_kinds(const Value& name) {
  static const struct {
    const char* name;
    uint8_t kinds;
  } kNames[] = {{"null", kNull},     {"boolean", kBoolean}, {"string", kString},           {"array", kArray},
                {"object", kObject}, {"integer", kWhole},   {"number", kWhole | kFraction}};
  if (name.kind != Kind::String) return 0;
  char t[16];
  json::unescape_cstr(name, t);
  for (const auto& n : kNames) {
    if (std::strcmp(t, n.name) == 0) return n.kinds;
  }
  return 0;
}

// The kinds "type" (a name or an array of them) admits; unknown names add nothing.
uint8_t type_kinds(const Value& type) {
  if (type.kind == Kind::String) return name_kinds(type);
  uint8_t kinds = 0;
  json::Items items(type);
  Value t;
  while (type.kind == Kind::Array && items.next(&t)) kinds |= name_kinds(t);
  return kinds;
}

uint8_t kinds_at(const Value& root, const Value& schema, int depth) {
  if (depth > kMaxDepth) return kAll;
  if (schema.kind == Kind::Bool) return schema.begin[0] == 't' ? kAll : 0;
  if (schema.kind != Kind::Object) return kAll;
  Value v;
  if (json::find(schema, "$ref", &v)) {
    char text[256], pointer[256];
    if (v.kind != Kind::String || json::unescape_cstr(v, text) >= sizeof text - 1 || text[0] != '#') return kAll;
    Value target;
    if (!json::percent_decode(text + 1, pointer) || !json::at_pointer(root, pointer, &target)) return kAll;
    return kinds_at(root, target, depth + 1);
  }
  uint8_t kinds = kAll;
  if (json::find(schema, "type", &v)) kinds &= type_kinds(v);
  Value values;
  const bool is_const = json::find(schema, "const", &values);
  if (is_const || (json::find(schema, "enum", &values) && values.kind == Kind::Array)) {
    uint8_t of_values = 0;
    json::Items items(values);
    Value item = values;
    for (bool more = is_const || items.next(&item); more; more = !is_const && items.next(&item)) {
      of_values |= value_kind(item);
    }
    kinds &= of_values;
  }
  for (const char* alternatives : {"anyOf", "oneOf", "allOf"}) {
    if (!json::find(schema, alternatives, &v) || v.kind != Kind::Array) continue;
    uint8_t of_branches = alternatives[1] == 'l' ? kAll : 0;  // allOf: every branch; the others: any
    json::Items items(v);
    Value branch;
    while (items.next(&branch)) {
      const uint8_t k = kinds_at(root, branch, depth + 1);
      of_branches = alternatives[1] == 'l' ? (of_branches & k) : (of_branches | k);
    }
    kinds &= of_branches;
  }
  return kinds;
}

}  // namespace

uint8_t schema_kinds(const Value& root, const Value& schema) { return kinds_at(root, schema, 0); }

bool schema_branches_disjoint(const Value& root, const Value& branches) {
  uint8_t seen = 0;
  json::Items items(branches);
  Value branch;
  while (items.next(&branch)) {
    const uint8_t k = schema_kinds(root, branch);
    if ((seen & k) != 0) return false;
    seen |= k;
  }
  return true;
}

bool json_type_valid(const Value& type) {
  if (type.kind == Kind::String) return name_kinds(type) != 0;
  if (type.kind != Kind::Array || json::count_items(type) == 0) return false;
  json::Items items(type);
  Value t;
  while (items.next(&t)) {
    if (name_kinds(t) == 0) return false;
  }
  return true;
}

bool json_type_admits(const Value& type, const Value& v) {
  if (type.kind != Kind::String && type.kind != Kind::Array) return false;
  return (type_kinds(type) & value_kind(v)) != 0;
}

}  // namespace tern
