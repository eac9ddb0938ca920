// JSON Schema -> GBNF: arrays (items, minItems, maxItems) and objects (properties, required,
// additionalProperties).
#include <cstdio>
#include <cstring>

#include "runtime/structured/json_rules.h"
#include "runtime/structured/json_schema_converter.h"

namespace tern::json_schema_internal {

using namespace json_rules;
using json::unescape_cstr;

Error Converter::array(const Value& schema, int depth) {
  int64_t min = 0, max = -1;
  TERN_RETURN_IF_ERROR(count(schema, "minItems", &min));
  TERN_RETURN_IF_ERROR(count(schema, "maxItems", &max));
  if (max >= 0 && max < min) return invalid("'maxItems' is below 'minItems'");
  if (min > 65535 || max > 65535) return unsupported("more than 65535 items ('minItems' / 'maxItems')");
  Value items;
  char item[24];
  if (json::find(schema, "items", &items)) {
    if (items.kind == Kind::Array) return unsupported("'items' as an array (draft 7's tuples; 'prefixItems' too)");
    if (items.kind == Kind::Bool && items.begin[0] == 'f') {
      if (min > 0) return unsupported("'items': false with 'minItems' above 0");
      max = 0;
    }
    const size_t mark = push_path("items");
    (void)depth;
    TERN_ASSIGN_OR_RETURN(const uint32_t id, add_job(JobKind::Items, items, Value{}));
    pop_path(mark);
    std::snprintf(item, sizeof item, "item%u", id);
  } else {
    used_ |= kValue;
    std::snprintf(item, sizeof item, "value");
  }
  used_ |= kWs;
  out_.put("\"[\" ws ");
  if (max != 0) {
    out_.printf("( %s ( \",\" ws %s )", item, item);
    const long long rest_min = min > 1 ? min - 1 : 0;
    if (max < 0) {
      out_.printf("{%lld,}", rest_min);
    } else {
      out_.printf("{%lld,%lld}", rest_min, static_cast<long long>(max - 1));
    }
    out_.put(min > 0 ? " )" : " )?");
  }
  out_.put(" \"]\" ws");
  return Error::Ok;
}

Error Converter::object(const Value& schema, int depth) {
  Value properties, required, additional;
  const bool has_properties = json::find(schema, "properties", &properties);
  const bool has_required = json::find(schema, "required", &required);
  if (has_properties && properties.kind != Kind::Object) return invalid("'properties' must be an object");
  if (has_required && required.kind != Kind::Array) return invalid("'required' must be an array");
  // Extra keys: absent or true allow any value, false none, a schema values of it.
  bool extra = true;
  Value extra_schema;
  extra_schema.kind = Kind::Bool;
  static const char kTrue[] = "true";
  extra_schema.begin = kTrue;
  extra_schema.end = kTrue + 4;
  if (json::find(schema, "additionalProperties", &additional)) {
    if (additional.kind == Kind::Bool) {
      extra = additional.begin[0] == 't';
    } else if (additional.kind == Kind::Object) {
      extra_schema = additional;
    } else {
      return invalid("'additionalProperties' must be a boolean or a schema");
    }
  }
  // Required names must be strings; a required name without a property schema takes any value.
  // The properties live in the converter's pool while this object is written (nested
  // objects take the slots above).
  Property* props = props_ + props_top_;
  const size_t kMaxProperties = kPropertyPool - props_top_;
  size_t n = 0;
  if (has_required) {
    json::Items items(required);
    Value name;
    while (items.next(&name)) {
      if (name.kind != Kind::String) return invalid("'required' must list strings");
    }
  }
  auto is_required = [&](const Value& key) {
    if (!has_required) return false;
    json::Items items(required);
    Value name;
    char buf[256];
    const size_t k = json::unescape(key, buf, sizeof buf);
    while (items.next(&name)) {
      if (k <= sizeof buf && json::string_equals(name, buf, k)) return true;
    }
    return false;
  };
  if (has_properties) {
    json::Members members(properties);
    Value key, value;
    while (members.next(&key, &value)) {
      if (n == kMaxProperties) return unsupported("more than %zu properties", kMaxProperties);
      props[n++] = Property{key, value, is_required(key)};
    }
  }
  if (has_required) {
    json::Items items(required);
    Value name;
    while (items.next(&name)) {
      bool listed = false;
      char buf[256];
      const size_t k = json::unescape(name, buf, sizeof buf);
      for (size_t i = 0; i < n && !listed; ++i) listed = k <= sizeof buf && json::string_equals(props[i].key, buf, k);
      if (listed) continue;
      if (!extra)
        return invalid("the required property '%.*s' is not in 'properties' and 'additionalProperties' is false",
                       static_cast<int>(k < sizeof buf ? k : sizeof buf), buf);
      if (n == kMaxProperties) return unsupported("more than %zu properties", kMaxProperties);
      props[n++] = Property{name, extra_schema, true};
    }
  }
  props_top_ += n;
  const Error e = object_body(schema, props, n, extra, extra_schema, depth);
  props_top_ -= n;
  return e;
}

Error Converter::object_body(const Value& schema, const Property* props, size_t n, bool extra,
                             const Value& extra_schema, int depth) {
  used_ |= kWs;
  out_.put("\"{\" ws ");
  bool any_optional = false;
  for (size_t i = 0; i < n; ++i) any_optional |= !props[i].required;
  char extra_kv[24] = "";
  if (extra) {
    const size_t mark = push_path("additionalProperties");
    TERN_ASSIGN_OR_RETURN(const uint32_t id, add_job(JobKind::AdditionalKeyValue, extra_schema, schema));
    pop_path(mark);
    std::snprintf(extra_kv, sizeof extra_kv, "kv%u", id);
  }
  if (!any_optional) {
    // Every listed property, in order, then any extra ones.
    for (size_t i = 0; i < n; ++i) {
      if (i > 0) out_.put(" \",\" ws ");
      const size_t mark = push_key(props[i].key);
      TERN_RETURN_IF_ERROR(key_value(props[i].key, props[i].schema, depth + 1));
      pop_path(mark);
    }
    if (extra) {
      if (n == 0) {
        out_.printf("( %s ( \",\" ws %s )* )?", extra_kv, extra_kv);
      } else {
        out_.printf(" ( \",\" ws %s )*", extra_kv);
      }
    }
  } else {
    // With optional properties, each key-value pair is a rule; the list is the first
    // present property, then each later one (mandatory or optional) with its comma.
    uint32_t* kv = kv_ids_;  // the jobs are added before anything nested is written
    for (size_t i = 0; i < n; ++i) {
      const size_t mark = push_key(props[i].key);
      TERN_ASSIGN_OR_RETURN(kv[i], add_job(JobKind::KeyValue, props[i].schema, props[i].key));
      pop_path(mark);
    }
    auto rest = [&](size_t from) {  // properties after a present one
      for (size_t j = from; j < n; ++j)
        out_.printf(props[j].required ? " \",\" ws kv%u" : " ( \",\" ws kv%u )?", kv[j]);
      if (extra) out_.printf(" ( \",\" ws %s )*", extra_kv);
    };
    out_.put("( ");
    bool first = true;
    size_t i = 0;
    for (; i < n; ++i) {  // the first present one is optional property i...
      if (!first) out_.put(" | ");
      first = false;
      out_.printf("kv%u", kv[i]);
      rest(i + 1);
      if (props[i].required) break;  // ...or the first mandatory one, which cannot be skipped
    }
    if (i == n) {  // every property is optional: the list may have only extra keys, or nothing
      if (extra) out_.printf(" | %s ( \",\" ws %s )*", extra_kv, extra_kv);
      out_.put(" )?");
    } else {
      out_.put(" )");
    }
  }
  out_.put(" \"}\" ws");
  return Error::Ok;
}

namespace {

// Whether two keys are one name: by their text when neither has an escape, else unescaped (a
// name past the buffer is compared by its length and first bytes, which may call two long
// names one: a refusal, never a wrong grammar).
bool same_key(const Value& a, const Value& b) {
  if (std::memchr(a.begin, '\\', a.size()) == nullptr && std::memchr(b.begin, '\\', b.size()) == nullptr)
    return a.size() == b.size() && std::memcmp(a.begin, b.begin, a.size()) == 0;
  char x[1024], y[1024];
  const size_t n = json::unescape(a, x, sizeof x), m = json::unescape(b, y, sizeof y);
  return n == m && std::memcmp(x, y, n < sizeof x ? n : sizeof x) == 0;
}

}  // namespace

Error Converter::check_unique_keys(const Value& v) {
  if (v.kind != Kind::Object && v.kind != Kind::Array) return Error::Ok;
  Value key, value;
  if (v.kind == Kind::Object) {  // this object's keys first, then what they hold (keys_ is reused)
    size_t n = 0;
    json::Members members(v);
    while (members.next(&key, &value)) {
      if (n == kPropertyPool) return unsupported("more than %zu keys in one object", kPropertyPool);
      for (size_t i = 0; i < n; ++i) {
        if (!same_key(keys_[i], key)) continue;
        char name[64];
        unescape_cstr(key, name);
        return unsupported("the key '%s' twice in one object (JSON readers differ on which one counts)", name);
      }
      keys_[n++] = key;
    }
  }
  json::Members members(v);
  json::Items items(v);
  while (v.kind == Kind::Object ? members.next(&key, &value) : items.next(&value)) {
    TERN_RETURN_IF_ERROR(check_unique_keys(value));
  }
  return Error::Ok;
}

// "key" ws ":" ws value
Error Converter::key_value(const Value& key, const Value& schema, int depth) {
  CanonicalJson c;
  TERN_RETURN_IF_ERROR(spelled(canonical_json_string(key, &c), "a property name"));
  out_.literal(c.buf, c.n);
  out_.put(" ws \":\" ws ");
  return expression(schema, depth + 1);
}

// A key not listed in `object`'s properties, then its value. The key has no escapes (so
// a listed name cannot be spelled another way).
Error Converter::additional_key_value(const Value& object, const Value& schema, int depth) {
  Value properties;
  excluded_.clear();
  if (json::find(object, "properties", &properties) && properties.kind == Kind::Object) {
    json::Members members(properties);
    Value key, value;
    while (members.next(&key, &value)) {
      char buf[4 * ExcludedKeys::kMaxNameCodePoints];
      const size_t k = json::unescape(key, buf, sizeof buf);
      if (k > sizeof buf) return unsupported("property names too many or too long to exclude");
      if (const char* why = excluded_.add(buf, k)) return unsupported("%s", why);
    }
  }
  used_ |= kWs;
  out_.put("\"\\\"\" ");
  excluded_.write(out_);
  out_.put(" \"\\\"\" ws \":\" ws ");
  return expression(schema, depth + 1);
}

}  // namespace tern::json_schema_internal
