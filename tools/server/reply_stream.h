// A generation's reply in OpenAI's shapes: whole (its text, or the tool call it is) or
// streamed as server-sent events, and the ids replies carry.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>

#include "tools/server/generation.h"
#include "tools/server/server_api.h"
#include "tools/server/structured_output.h"

namespace tern::server {

// The request offers tools the reply may call.
bool offers_tools(const GenerationRequest& r);

// A reply's id: "chatcmpl-..." or "cmpl-...", unique in this process.
std::string new_id(bool chat);

// A whole reply: its text, or the tool call it is.
nlohmann::json reply_body(bool chat, const std::string& id, int64_t created, const std::string& model,
                          const GenerationRequest& r, const Generation& g);

// A streamed reply: text as content deltas, or, once the reply shows it is a tool call, the
// call's id and name and then its arguments as they are generated (OpenAI's chunk shapes).
// Text that may still become a call is held back until that is decided.
class ReplyStream {
 public:
  using Writer = std::function<bool(const std::string&)>;
  ReplyStream(bool chat, std::string id, int64_t created, std::string model, bool tools, Writer write);

  // One generated piece; false: the client is gone.
  bool piece(const std::string& text);

  // The last chunk (the finish reason: "tool_calls" for a complete call).
  void finish(const std::string* finish_reason);

 private:
  bool content(const std::string& text);
  bool send(const std::string& event) { return write_(event); }

  bool chat_;
  std::string id_;
  int64_t created_;
  std::string model_;
  ToolCallScanner call_;
  Writer write_;
  bool first_ = true;
  bool held_sent_ = false;
};

}  // namespace tern::server
