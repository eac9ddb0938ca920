#include "tools/server/structured_output.h"

#include <atomic>
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
    if (m.contains("tool_call_id") && m["tool_call_id"].is_string()) {
      msg->tool_call_id = m["tool_call_id"].get<std::string>();
    }
    return true;
  }
  // An assistant's earlier calls, kept as sent: the library writes them as the model does.
  msg->content.clear();
  msg->has_content = m.contains("content") && !m["content"].is_null();
  if (msg->has_content && !content_text(m["content"], &msg->content)) {
    return refuse(e, "each message needs a string 'content'", "messages");
  }
  const json& calls = m["tool_calls"];
  if (!calls.is_array() || calls.empty()) return refuse(e, "'tool_calls' must be a non-empty array", "messages");
  for (const json& c : calls) {
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object() || !c["function"].contains("name") ||
        !c["function"]["name"].is_string()) {
      return refuse(e, "each tool call needs 'function' with a 'name'", "messages");
    }
    const json& fn = c["function"];
    ToolCallMessage call;
    call.name = fn["name"].get<std::string>();
    if (c.contains("id") && c["id"].is_string()) call.id = c["id"].get<std::string>();
    if (fn.contains("arguments") && fn["arguments"].is_string()) {
      call.arguments = fn["arguments"].get<std::string>();
    } else if (fn.contains("arguments") && !fn["arguments"].is_null()) {
      call.arguments = fn["arguments"].dump(-1, ' ', false, json::error_handler_t::replace);
    } else {
      call.arguments = "{}";
    }
    msg->tool_calls.push_back(std::move(call));
  }
  return true;
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
                    const std::string& name, const std::string& arguments, const std::string& finish_reason,
                    const Usage& usage) {
  json body = completion_body(true, id, created, model, "", finish_reason, usage);
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
  json j = {{"id", id},
            {"object", "chat.completion.chunk"},
            {"created", created},
            {"model", model},
            {"choices",
             json::array({json{{"index", 0}, {"delta", delta}, {"finish_reason", nullptr}, {"logprobs", nullptr}}})}};
  if (!system_fingerprint().empty()) j["system_fingerprint"] = system_fingerprint();
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

}  // namespace tern::server
