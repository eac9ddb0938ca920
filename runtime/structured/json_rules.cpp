// The JSON rules converted schemas share, as GBNF text.
#include "runtime/structured/json_rules.h"

namespace tern::json_rules {

namespace {

constexpr const char* kWsRule = "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";
constexpr const char* kStringRule = "string ::= \"\\\"\" " TERN_JSON_CHAR "* \"\\\"\" ws\n";
constexpr const char* kNumberRule =
    "number ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )? ws\n";
constexpr const char* kIntegerRule = "integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ws\n";
constexpr const char* kBooleanRule = "boolean ::= ( \"true\" | \"false\" ) ws\n";
constexpr const char* kNullRule = "null ::= \"null\" ws\n";
constexpr const char* kValueRules =
    "value ::= object | array | string | number | boolean | null\n"
    "object ::= \"{\" ws ( string \":\" ws value ( \",\" ws string \":\" ws value )* )? \"}\" ws\n"
    "array ::= \"[\" ws ( value ( \",\" ws value )* )? \"]\" ws\n";
// Dates exactly as RFC 3339's full-date (days per month, February 29 in leap years), years
// 0001-9999; times with seconds, optional fraction and a zone.
constexpr const char* kDateBodyRule =
    "date-body ::= year \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) | "
    "( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | "
    "\"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) ) | leap-year \"-02-29\"\n"
    "year ::= [1-9] [0-9]{3} | \"0\" ( [1-9] [0-9]{2} | \"0\" ( [1-9] [0-9] | \"0\" [1-9] ) )\n"
    "leap-year ::= [0-9] [0-9] ( \"0\" [48] | [2468] [048] | [13579] [26] ) | "
    "( \"0\" [48] | [2468] [048] | [13579] [26] ) \"00\"\n";
constexpr const char* kTimeBodyRule =
    "time-body ::= ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,9} )? "
    "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )\n";
constexpr const char* kUuidRule =
    "uuid ::= \"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
    "[0-9a-fA-F]{12} \"\\\"\" ws\n";

}  // namespace

void write_used_rules(GbnfWriter& out, uint32_t used) {
  const struct {
    uint32_t bit;
    const char* text;
  } rules[] = {{kWs, kWsRule},           {kString, kStringRule}, {kNumber, kNumberRule}, {kInteger, kIntegerRule},
               {kBoolean, kBooleanRule}, {kNull, kNullRule},     {kValue, kValueRules}};
  if (used & kValue) used |= kString | kNumber | kBoolean | kNull;
  used |= kWs;
  for (const auto& r : rules) {
    if (used & r.bit) out.put(r.text);
  }
  if (used & (kDate | kDateTime)) out.put(kDateBodyRule);
  if (used & (kTime | kDateTime)) out.put(kTimeBodyRule);
  if (used & kDate) out.put("date ::= \"\\\"\" date-body \"\\\"\" ws\n");
  if (used & kTime) out.put("time ::= \"\\\"\" time-body \"\\\"\" ws\n");
  if (used & kDateTime) out.put("date-time ::= \"\\\"\" date-body [Tt] time-body \"\\\"\" ws\n");
  if (used & kUuid) out.put(kUuidRule);
}

}  // namespace tern::json_rules
