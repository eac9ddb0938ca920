#include "runtime/chat/tool_prompt.h"

#include <cstring>

#include "runtime/chat/json_text.h"

namespace tern::chat {

namespace {

// ChatWriter's content as an `Out` for json_text.h.
struct ContentOut {
  ChatWriter& w;
  void put(const char* s, size_t n) { w.content(s, n); }
  void put(const char* s) { w.content(s); }
};

// JSON text as given when it parses, else as a JSON string (an argument text the model wrote
// that is not JSON is still shown as it was).
void write_json_or_string(ContentOut& out, const char* text) {
  const size_t size = std::strlen(text);
  auto value = json::parse(text, size);
  if (value.ok()) {
    write_json_compact(out, *value);
  } else {
    clear_last_error();
    write_json_string(out, text, size);
  }
}

void write_tools(ContentOut& out, const Request& r) {
  out.put(
      "You can call functions. To call one, answer with only a JSON object: {\"name\": <the function's name>, "
      "\"arguments\": <its arguments>}.");
  if (r.tool_choice == ToolChoice::Function) {
    out.put(" Call ");
    out.put(r.tool_name);
    out.put(".");
  }
  out.put("\nFunctions:");
  for (size_t i = 0; i < r.n_tools; ++i) {
    const Tool& t = r.tools[i];
    out.put("\n{\"name\":");
    write_json_string(out, t.name);
    if (t.description != nullptr && t.description[0] != '\0') {
      out.put(",\"description\":");
      write_json_string(out, t.description);
    }
    out.put(",\"parameters\":");
    if (t.parameters != nullptr) {
      write_json_or_string(out, t.parameters);
    } else {
      out.put("{\"type\":\"object\",\"properties\":{}}");
    }
    out.put("}");
  }
}

}  // namespace

Error render_prompt(const ChatFormatView& format, const Tokenizer* tokenizer, const Request& r, char* buf,
                    size_t capacity, size_t* size) {
  ChatWriter w(format, tokenizer, buf, capacity);
  ContentOut out{w};
  w.start();
  size_t first = 0;
  if (r.offers_tools()) {
    w.begin("system");
    const Turn* head = r.n_messages > 0 ? &r.messages[0] : nullptr;
    if (head != nullptr && (std::strcmp(head->role, "system") == 0 || std::strcmp(head->role, "developer") == 0)) {
      if (head->content != nullptr) w.content(head->content);
      w.content("\n\n");
      first = 1;
    }
    write_tools(out, r);
    w.end();
  }
  for (size_t i = first; i < r.n_messages; ++i) {
    const Turn& m = r.messages[i];
    TERN_ASSIGN_OR_RETURN(const char* role, chat_role(format, m.role, i));
    w.begin(role);
    const bool content = m.content != nullptr && m.content[0] != '\0';
    if (content) w.content(m.content);
    for (size_t c = 0; c < m.n_tool_calls; ++c) {
      if (content || c > 0) w.content("\n");
      out.put("{\"name\":");
      write_json_string(out, m.tool_calls[c].name);
      out.put(",\"arguments\":");
      if (m.tool_calls[c].arguments != nullptr) {
        write_json_or_string(out, m.tool_calls[c].arguments);
      } else {
        out.put("{}");
      }
      out.put("}");
    }
    w.end();
  }
  w.generation_prefix(true);
  return w.finish(size);
}

}  // namespace tern::chat
