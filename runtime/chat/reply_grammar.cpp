#include "runtime/chat/reply_grammar.h"

#include <cstdio>
#include <cstring>

#include "runtime/chat/json_text.h"
#include "runtime/structured/gbnf_writer.h"
#include "runtime/structured/json_schema.h"

namespace tern::chat {

namespace {

constexpr char kAnyObject[] = "{\"type\":\"object\"}";
constexpr char kNoArguments[] = "{\"type\":\"object\",\"properties\":{}}";
constexpr char kRoot[] = "root ::= ";
// tool_choice auto without a JSON reply: a call, or text that does not start like one.
constexpr char kCallOrText[] = "root ::= tool-call | [^{] .*\ntool-call ::= ";

// A schema the request gave, parsed (InvalidArgument naming `what` when it is not JSON).
Result<json::Value> parse_schema(const char* text, const char* what) {
  auto v = json::parse(text, std::strlen(text));
  if (!v.ok()) {
    char why[256];
    std::snprintf(why, sizeof why, "%s", last_error_message());
    return fail(v.error(), "%s is not JSON: %s", what, why);
  }
  return v;
}

// One document: {"anyOf": [the calls..., the JSON reply]}.
Error compose_tools(const Request& r, bool json_reply, GbnfWriter& out) {
  out.put("{\"anyOf\":[");
  size_t n = 0;
  char where[64];
  for (size_t i = 0; i < r.n_tools; ++i) {
    const Tool& t = r.tools[i];
    if (r.tool_choice == ToolChoice::Function && std::strcmp(t.name, r.tool_name) != 0) continue;
    if (n > 0) out.put(",");
    // "name" first: the model names the function before its arguments.
    out.put("{\"type\":\"object\",\"properties\":{\"name\":{\"const\":");
    write_json_string(out, t.name);
    out.put("},\"arguments\":");
    char what[96];
    std::snprintf(what, sizeof what, "the parameters of tool '%s'", t.name);
    std::snprintf(where, sizeof where, "/anyOf/%zu/properties/arguments", n);
    TERN_ASSIGN_OR_RETURN(const json::Value params,
                          parse_schema(t.parameters != nullptr ? t.parameters : kNoArguments, what));
    write_json_compact(out, params, where);
    out.put("},\"required\":[\"name\",\"arguments\"],\"additionalProperties\":false}");
    ++n;
  }
  if (json_reply) {
    std::snprintf(where, sizeof where, "/anyOf/%zu", n);
    const char* reply = r.response_format == ResponseFormat::JsonObject ? kAnyObject : r.response_schema;
    TERN_ASSIGN_OR_RETURN(const json::Value schema, parse_schema(reply, "response_format's schema"));
    out.put(",");
    write_json_compact(out, schema, where);
  }
  out.put("]}");
  return Error::Ok;
}

}  // namespace

Error reply_grammar(const Request& r, char* buf, size_t capacity, void* work, size_t work_bytes, const char** grammar,
                    size_t* size) {
  *grammar = "";
  *size = 0;
  if (r.response_format == ResponseFormat::Grammar) {
    *grammar = r.grammar;
    *size = std::strlen(r.grammar);
    return Error::Ok;
  }
  const bool tools = r.offers_tools();
  if (!tools && r.response_format == ResponseFormat::Text) return Error::Ok;
  TERN_CHECK_OR_RETURN(work != nullptr, Error::InvalidState,
                       "a JSON response_format or tools need grammar memory: the model was loaded with "
                       "tern_model_params.grammar_bytes 0");
  // The schema: the request's own, or composed at the start of buf.
  const char* schema = r.response_format == ResponseFormat::JsonObject ? kAnyObject : r.response_schema;
  size_t schema_size = 0;
  size_t used = 0;
  const bool json_reply = r.response_format != ResponseFormat::Text;
  if (tools) {
    GbnfWriter composed(buf, capacity);
    TERN_RETURN_IF_ERROR(compose_tools(r, json_reply && r.tool_choice == ToolChoice::Auto, composed));
    composed.finish();
    TERN_CHECK_OR_RETURN(composed.size() < capacity, Error::GrammarTooLarge,
                         "the tools' schemas take %zu bytes; the session's chat memory holds %zu (64 KiB and 16 "
                         "bytes per context token)",
                         composed.size(), capacity);
    schema = buf;
    schema_size = composed.size();
    used = schema_size + 1;
  } else {
    schema_size = std::strlen(schema);
  }
  // The grammar after it; for a call or text, its root rule is renamed tool-call and a root
  // written in front, over the converter's "root ::= ".
  const bool call_or_text = tools && r.tool_choice == ToolChoice::Auto && !json_reply;
  const size_t shift = call_or_text ? sizeof kCallOrText - sizeof kRoot : 0;
  TERN_CHECK_OR_RETURN(used + shift < capacity, Error::GrammarTooLarge,
                       "the tools' schemas fill the session's chat memory (%zu bytes)", capacity);
  char* out = buf + used;
  size_t written = 0;
  const Error e =
      json_schema_to_grammar(schema, schema_size, out + shift, capacity - used - shift, &written, work, work_bytes);
  if (e == Error::OutOfRange) {
    return fail(Error::GrammarTooLarge,
                "the reply's grammar takes %zu bytes; the session's chat memory holds %zu (64 KiB and 16 bytes per "
                "context token)",
                written + shift + used, capacity);
  }
  TERN_RETURN_IF_ERROR(e);
  if (call_or_text) std::memcpy(out, kCallOrText, sizeof kCallOrText - 1);
  *grammar = out;
  *size = written + shift;
  return Error::Ok;
}

}  // namespace tern::chat
