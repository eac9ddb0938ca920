// Structured output in tern-server: OpenAI's response_format and tools / tool_choice, how the
// tools are shown to the model, the grammar that holds the reply to them, and the tool calls
// read back out of the reply (whole or streamed), apart from HTTP and the model.
//
// How tools reach the model, in every chat format (llama3, bitnet-2b4t, plain): a system
// message (the request's first one, extended, or a new first one) lists each function as a
// JSON line {"name", "description", "parameters"} after an instruction to answer a call with
// only {"name": ..., "arguments": ...}. The grammar then allows exactly that object, with
// "name" one of the functions and "arguments" valid against its parameters (tool_choice
// "required"; a named function: only it), or that or plain text not starting with "{"
// (tool_choice "auto"). Earlier calls in the conversation (assistant messages with
// tool_calls) are rendered as the same object, one per line; a tool's result (role "tool")
// is a "tool" turn of the format (tern_chat_apply: "ipython" in llama3). One call per reply
// (parallel_tool_calls is accepted; more than one call is never produced).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tools/server/grammar_cache.h"
#include "tools/server/server_api.h"

namespace tern::server {

// The messages to render with the chat format: the request's, with the tools shown.
std::vector<Message> prompt_messages(const GenerationRequest& r);

// The GBNF grammar the reply must follow ("" for none). False with a 400 error when a schema
// cannot be turned into one (the message names the keyword). Conversions are kept in
// schema_grammar_cache(), keyed by the schema document's text.
bool reply_grammar(const StructuredOutput& s, std::string* grammar, ApiError* e);
SchemaGrammarCache& schema_grammar_cache();

// Reads a reply as it streams: whether it is a tool call (it opens with {"name": "<a
// function>", "arguments": ...), the function's name, and the text of "arguments" exactly
// as generated, piece by piece.
class ToolCallScanner {
 public:
  enum class Kind { Undecided, Call, Content };
  explicit ToolCallScanner(bool tools) : kind_(tools ? Kind::Undecided : Kind::Content) {}
  // Text generated next; returns the part of the arguments it adds (may be empty).
  std::string push(const std::string& text);
  Kind kind() const { return kind_; }
  // The function's name, once the call is recognised.
  const std::string& name() const { return name_; }
  const std::string& arguments() const { return arguments_; }
  // A call whose arguments value is complete.
  bool complete_call() const { return kind_ == Kind::Call && done_; }
  const std::string& text() const { return text_; }

 private:
  Kind kind_;
  std::string text_;
  std::string name_;
  std::string arguments_;
  size_t scanned_ = 0;  // where the argument scanner goes on
  bool done_ = false;   // the arguments value ended
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false;
};

// A whole reply with a tool call: message {role, content: null, tool_calls: [...]}.
nlohmann::json tool_call_body(const std::string& id, int64_t created, const std::string& model,
                              const std::string& call_id, const std::string& name, const std::string& arguments,
                              const Usage& usage);
// Streamed tool-call chunks: the first (role, id, type, name, empty arguments) and then
// argument pieces, as OpenAI sends them.
std::string tool_call_chunk(const std::string& id, int64_t created, const std::string& model,
                            const std::string* call_id, const std::string* name, const std::string& arguments,
                            bool first);
std::string new_call_id();

}  // namespace tern::server
