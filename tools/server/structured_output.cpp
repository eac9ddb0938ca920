#include "tools/server/structured_output.h"

#include <atomic>
#include <initializer_list>
#include <random>

#include "include/tern.h"

namespace tern::server {

using nlohmann::json;
using ojson = nlohmann::ordered_json;  // schemas: the request's key order is the properties' order

namespace {

bool refuse(ApiError* e, std::string message, std::string param) {
  e->status = 400;
  e->message = std::move(message);
  e->param = std::move(param);
  e->code.clear();
  return false;
}

bool valid_function_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

// Text of a message content: a string or [{"type": "text", "text": ...}].
template <typename Json>
bool content_text(const Json& c, std::string* out) {
  if (c.is_string()) {
    *out = c.template get<std::string>();
    return true;
  }
  if (!c.is_array()) return false;
  for (const auto& part : c) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string()) {
      return false;
    }
    *out += part["text"].template get<std::string>();
  }
  return true;
}

// A JSON pointer "#/a/b" inside a schema moved to `at` of a larger document.
void move_refs(ojson& schema, const std::string& at) {
  if (schema.is_object()) {
    for (auto it = schema.begin(); it != schema.end(); ++it) {
      if (it.key() == "$ref" && it.value().is_string()) {
        const std::string ref = it.value().get<std::string>();
        if (!ref.empty() && ref[0] == '#') it.value() = "#" + at + ref.substr(1);
      } else {
        move_refs(it.value(), at);
      }
    }
  } else if (schema.is_array()) {
    for (ojson& item : schema) move_refs(item, at);
  }
}

bool schema_grammar(const ojson& schema, const char* param, std::string* grammar, ApiError* e) {
  const std::string text = schema.dump();
  if (schema_grammar_cache().find(text, grammar)) return true;
  size_t size = 0;
  tern_status s = tern_json_schema_to_grammar(text.data(), text.size(), nullptr, 0, &size);
  std::vector<char> buf(size + 1);
  if (s == TERN_OUT_OF_RANGE) s = tern_json_schema_to_grammar(text.data(), text.size(), buf.data(), buf.size(), &size);
  if (s != TERN_OK) return refuse(e, std::string(param) + ": " + tern_last_error_message(), param);
  grammar->assign(buf.data(), size);
  schema_grammar_cache().insert(text, *grammar);
  return true;
}

}  // namespace

SchemaGrammarCache& schema_grammar_cache() {
  static SchemaGrammarCache cache;
  return cache;
}

bool parse_structured_output(const std::string& body, bool chat, StructuredOutput* out, ApiError* e) {
  const ojson j = ojson::parse(body, nullptr, false);
  if (!j.is_object()) return true;  // the caller refuses it
  if (j.contains("response_format") && !j["response_format"].is_null()) {
    const ojson& f = j["response_format"];
    const std::string type =
        f.is_object() && f.contains("type") && f["type"].is_string() ? f["type"].get<std::string>() : "";
    if (type == "text") {
      out->format = StructuredOutput::Format::Text;
    } else if (type == "json_object") {
      out->format = StructuredOutput::Format::JsonObject;
    } else if (type == "json_schema") {
      const ojson* js = f.contains("json_schema") ? &f["json_schema"] : nullptr;
      if (js == nullptr || !js->is_object() || !js->contains("schema") ||
          !((*js)["schema"].is_object() || (*js)["schema"].is_boolean())) {
        return refuse(e, "'response_format.json_schema.schema' must be a JSON Schema", "response_format");
      }
      if (js->contains("name") && !(*js)["name"].is_string()) {
        return refuse(e, "'response_format.json_schema.name' must be a string", "response_format");
      }
      if (js->contains("strict") && !(*js)["strict"].is_null() && !(*js)["strict"].is_boolean()) {
        return refuse(e, "'response_format.json_schema.strict' must be a boolean", "response_format");
      }
      out->format = StructuredOutput::Format::JsonSchema;
      out->schema = (*js)["schema"];
    } else {
      return refuse(e, "'response_format.type' must be 'text', 'json_object' or 'json_schema'", "response_format");
    }
  }
  if (j.contains("grammar") && !j["grammar"].is_null()) {
    if (!j["grammar"].is_string()) return refuse(e, "'grammar' must be a GBNF grammar (a string)", "grammar");
    if (out->format != StructuredOutput::Format::Text) {
      return refuse(e, "'grammar' and a JSON 'response_format' cannot both be given", "grammar");
    }
    out->format = StructuredOutput::Format::Grammar;
    out->grammar = j["grammar"].get<std::string>();
  }
  if (j.contains("parallel_tool_calls") && !j["parallel_tool_calls"].is_null() &&
      !j["parallel_tool_calls"].is_boolean()) {
    return refuse(e, "'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
  }
  if (j.contains("tools") && !j["tools"].is_null()) {
    if (!chat) return refuse(e, "'tools' are for /v1/chat/completions", "tools");
    if (!j["tools"].is_array()) return refuse(e, "'tools' must be an array", "tools");
    for (const ojson& t : j["tools"]) {
      if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") ||
          !t["function"].is_object()) {
        return refuse(e, "each tool must be {\"type\": \"function\", \"function\": {...}}", "tools");
      }
      const ojson& fn = t["function"];
      ToolFunction f;
      f.name = fn.contains("name") && fn["name"].is_string() ? fn["name"].get<std::string>() : "";
      if (!valid_function_name(f.name)) {
        return refuse(e, "a function name must be 1 to 64 of a-z, A-Z, 0-9, _ and -", "tools");
      }
      for (const ToolFunction& other : out->tools) {
        if (other.name == f.name) return refuse(e, "the function '" + f.name + "' is listed twice", "tools");
      }
      if (fn.contains("description") && !fn["description"].is_null()) {
        if (!fn["description"].is_string()) return refuse(e, "a function's 'description' must be a string", "tools");
        f.description = fn["description"].get<std::string>();
      }
      f.parameters = ojson{{"type", "object"}, {"properties", ojson::object()}};
      if (fn.contains("parameters") && !fn["parameters"].is_null()) {
        if (!fn["parameters"].is_object()) return refuse(e, "a function's 'parameters' must be a JSON Schema", "tools");
        f.parameters = fn["parameters"];
      }
      out->tools.push_back(std::move(f));
    }
    if (!out->tools.empty()) out->tool_choice = StructuredOutput::ToolChoice::Auto;
    if (out->format == StructuredOutput::Format::Grammar && !out->tools.empty()) {
      return refuse(e, "'grammar' and 'tools' cannot both be given", "grammar");
    }
  }
  if (j.contains("tool_choice") && !j["tool_choice"].is_null()) {
    const ojson& c = j["tool_choice"];
    using Choice = StructuredOutput::ToolChoice;
    if (c == "none") {
      out->tool_choice = Choice::None;
    } else if (c == "auto" || c == "required") {
      if (out->tools.empty()) return refuse(e, "'tool_choice' needs 'tools'", "tool_choice");
      out->tool_choice = c == "auto" ? Choice::Auto : Choice::Required;
    } else if (c.is_object() && c.value("type", "") == "function" && c.contains("function") &&
               c["function"].is_object() && c["function"].contains("name") && c["function"]["name"].is_string()) {
      out->tool_name = c["function"]["name"].get<std::string>();
      bool known = false;
      for (const ToolFunction& f : out->tools) known |= f.name == out->tool_name;
      if (!known)
        return refuse(e, "'tool_choice' names '" + out->tool_name + "', which is not in 'tools'", "tool_choice");
      out->tool_choice = Choice::Named;
    } else {
      return refuse(e,
                    "'tool_choice' must be 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": "
                    "{\"name\": ...}}",
                    "tool_choice");
    }
  }
  return true;
}

bool parse_tool_message(const json& m, Message* msg, ApiError* e) {
  if (msg->role == "tool") {
    if (!m.contains("content") || !content_text(m["content"], &msg->content)) {
      return refuse(e, "a 'tool' message needs a string 'content' (the tool's result)", "messages");
    }
    return true;
  }
  // An assistant's earlier calls, written as the model writes them.
  msg->content.clear();
  if (m.contains("content") && !m["content"].is_null()) {
    if (!content_text(m["content"], &msg->content))
      return refuse(e, "each message needs a string 'content'", "messages");
    if (!msg->content.empty()) msg->content += "\n";
  }
  const json& calls = m["tool_calls"];
  if (!calls.is_array() || calls.empty()) return refuse(e, "'tool_calls' must be a non-empty array", "messages");
  for (size_t i = 0; i < calls.size(); ++i) {
    const json& c = calls[i];
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object() || !c["function"].contains("name") ||
        !c["function"]["name"].is_string()) {
      return refuse(e, "each tool call needs 'function' with a 'name'", "messages");
    }
    const json& fn = c["function"];
    nlohmann::ordered_json call;  // in the order the model writes calls: name, then arguments
    call["name"] = fn["name"];
    if (fn.contains("arguments") && fn["arguments"].is_string()) {
      const ojson args = ojson::parse(fn["arguments"].get<std::string>(), nullptr, false);
      call["arguments"] = args.is_discarded() ? ojson(fn["arguments"].get<std::string>()) : args;
    } else {
      call["arguments"] = fn.contains("arguments") ? fn["arguments"] : json::object();
    }
    if (i > 0) msg->content += "\n";
    msg->content += call.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  return true;
}

std::vector<Message> prompt_messages(const GenerationRequest& r) {
  std::vector<Message> messages = r.messages;
  const StructuredOutput& s = r.structured;
  if (s.tools.empty() || s.tool_choice == StructuredOutput::ToolChoice::None) return messages;
  std::string text =
      "You can call functions. To call one, answer with only a JSON object: {\"name\": <the function's name>, "
      "\"arguments\": <its arguments>}.";
  if (s.tool_choice == StructuredOutput::ToolChoice::Named) text += " Call " + s.tool_name + ".";
  text += "\nFunctions:";
  for (const ToolFunction& f : s.tools) {
    nlohmann::ordered_json line;
    line["name"] = f.name;
    if (!f.description.empty()) line["description"] = f.description;
    line["parameters"] = f.parameters;
    text += "\n" + line.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  if (!messages.empty() && messages[0].role == "system") {
    messages[0].content += "\n\n" + text;
  } else {
    messages.insert(messages.begin(), Message{"system", text});
  }
  return messages;
}

bool reply_grammar(const StructuredOutput& s, std::string* grammar, ApiError* e) {
  grammar->clear();
  using Choice = StructuredOutput::ToolChoice;
  using Format = StructuredOutput::Format;
  const bool tools = !s.tools.empty() && s.tool_choice != Choice::None;
  if (s.format == Format::Grammar) {
    *grammar = s.grammar;
    return true;
  }
  if (!tools) {
    if (s.format == Format::JsonObject) return schema_grammar(ojson{{"type", "object"}}, "response_format", grammar, e);
    if (s.format == Format::JsonSchema) return schema_grammar(s.schema, "response_format", grammar, e);
    return true;
  }
  // One document: anyOf the calls (and the JSON reply, with tool_choice auto), each part's
  // $refs moved to where it now sits.
  ojson alternatives = ojson::array();
  for (const ToolFunction& f : s.tools) {
    if (s.tool_choice == Choice::Named && f.name != s.tool_name) continue;
    ojson arguments = f.parameters;
    move_refs(arguments, "/anyOf/" + std::to_string(alternatives.size()) + "/properties/arguments");
    ojson properties;  // "name" first: the model names the function before its arguments
    properties["name"] = ojson{{"const", f.name}};
    properties["arguments"] = arguments;
    alternatives.push_back(ojson{{"type", "object"},
                                 {"properties", properties},
                                 {"required", {"name", "arguments"}},
                                 {"additionalProperties", false}});
  }
  const bool json_reply = s.tool_choice == Choice::Auto && s.format != Format::Text;
  if (json_reply) {
    ojson reply = s.format == Format::JsonObject ? ojson{{"type", "object"}} : s.schema;
    move_refs(reply, "/anyOf/" + std::to_string(alternatives.size()));
    alternatives.push_back(reply);
  }
  if (!schema_grammar(ojson{{"anyOf", alternatives}}, "tools", grammar, e)) return false;
  if (s.tool_choice == Choice::Auto && !json_reply) {
    // A call, or text that does not start like one.
    const std::string root = "root ::= ";
    *grammar = "root ::= tool-call | [^{] .*\ntool-call ::= " + grammar->substr(root.size());
  }
  return true;
}

// ---- Reading calls back ----

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// How far `text` matches the start of a call, {"name": "<name>", "arguments": ...
// Returns 1 when it is one (*args: where the arguments value starts, *name), 0 while it may
// still become one, -1 when it cannot.
int call_prefix(const std::string& text, size_t* args, std::string* name) {
  size_t i = 0;
  auto ws = [&] {
    while (i < text.size() && is_ws(text[i])) ++i;
  };
  auto literal = [&](const char* l) -> int {  // 1 matched, 0 text ended inside, -1 differs
    for (const char* p = l; *p != '\0'; ++p, ++i) {
      if (i == text.size()) return 0;
      if (text[i] != *p) return -1;
    }
    return 1;
  };
  // The pieces with optional white space between them; 1 when all matched.
  auto pieces = [&](std::initializer_list<const char*> list) -> int {
    bool first = true;
    for (const char* piece : list) {
      if (!first) ws();
      first = false;
      const int m = literal(piece);
      if (m != 1) return m;
    }
    return 1;
  };
  int m;
  if ((m = pieces({"{", "\"name\"", ":", "\""})) != 1) return m;  // the reply opens with the brace
  const size_t start = i;
  while (i < text.size() && text[i] != '"') {
    if (text[i] == '\\') return -1;  // function names have no escapes
    ++i;
  }
  if (i == text.size()) return 0;
  *name = text.substr(start, i - start);
  ++i;
  ws();
  if ((m = pieces({",", "\"arguments\"", ":"})) != 1) return m;
  ws();
  if (i == text.size()) return 0;
  *args = i;
  return 1;
}

}  // namespace

std::string ToolCallScanner::push(const std::string& piece) {
  text_ += piece;
  if (kind_ == Kind::Undecided) {
    size_t args = 0;
    std::string name;
    const int m = call_prefix(text_, &args, &name);
    if (m < 0) kind_ = Kind::Content;
    if (m <= 0) return "";
    kind_ = Kind::Call;
    name_ = name;
    scanned_ = args;
  }
  if (kind_ != Kind::Call || done_) return "";
  // The arguments value: up to where its brackets close (or a scalar ends).
  const size_t from = scanned_;
  for (; scanned_ < text_.size() && !done_; ++scanned_) {
    const char c = text_[scanned_];
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
        if (depth_ == 0) done_ = true;
      }
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (c == '}' || c == ']') {
      if (depth_ == 0) {  // the call's own '}' after a scalar
        done_ = true;
        break;
      }
      if (--depth_ == 0) done_ = true;
    } else if (depth_ == 0 && (c == ',' || is_ws(c))) {
      done_ = true;
      break;
    }
  }
  const std::string out = text_.substr(from, scanned_ - from);
  arguments_ += out;
  return out;
}

std::string new_call_id() {
  static std::atomic<uint64_t> counter{0};
  std::mt19937_64 rng(std::random_device{}() ^ (counter++ * 0x9E3779B97F4A7C15ull));
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kChars[rng() % (sizeof kChars - 1)];
  return id;
}

json tool_call_body(const std::string& id, int64_t created, const std::string& model, const std::string& call_id,
                    const std::string& name, const std::string& arguments, const Usage& usage) {
  json body = completion_body(true, id, created, model, "", "tool_calls", usage);
  json& message = body["choices"][0]["message"];
  message["content"] = nullptr;
  message["tool_calls"] = json::array(
      {json{{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}}});
  return body;
}

std::string tool_call_chunk(const std::string& id, int64_t created, const std::string& model,
                            const std::string* call_id, const std::string* name, const std::string& arguments,
                            bool first) {
  json call = {{"index", 0}};
  if (call_id != nullptr) call["id"] = *call_id, call["type"] = "function";
  json fn = {{"arguments", arguments}};
  if (name != nullptr) fn["name"] = *name;
  call["function"] = fn;
  json delta = {{"tool_calls", json::array({call})}};
  if (first) delta["role"] = "assistant", delta["content"] = nullptr;
  const json j = {
      {"id", id},
      {"object", "chat.completion.chunk"},
      {"created", created},
      {"model", model},
      {"choices",
       json::array({json{{"index", 0}, {"delta", delta}, {"finish_reason", nullptr}, {"logprobs", nullptr}}})}};
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace tern::server
