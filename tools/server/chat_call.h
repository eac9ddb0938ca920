// A parsed request as the library's chat engine takes it: the tern_chat_request and the
// storage its pointers point into (the request's own strings, and the schemas written out as
// text). The engine renders the prompt, builds the reply's grammar and reads tool calls back;
// the server only translates.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "include/tern.h"
#include "tools/server/server_api.h"

namespace tern::server {

class ChatCall {
 public:
  // `r` must outlive the call (its strings are pointed at, not copied).
  explicit ChatCall(const GenerationRequest& r);
  ChatCall(const ChatCall&) = delete;
  ChatCall& operator=(const ChatCall&) = delete;

  const tern_chat_request& request() const { return request_; }
  void set_max_tokens(uint32_t n) { request_.max_tokens = n; }
  // What decides the reply's grammar (response_format, grammar, tools' names and parameters,
  // tool_choice), as text: the key of its conversion in schema_grammar_cache().
  const std::string& structure() const { return structure_; }

 private:
  std::vector<std::vector<tern_tool_call>> calls_;
  std::vector<tern_chat_turn> turns_;
  std::vector<std::string> parameters_;
  std::vector<tern_chat_tool> tools_;
  std::string schema_;
  std::vector<const char*> stops_;
  std::vector<tern_logit_bias> bias_;
  std::string structure_;
  tern_chat_request request_;
};

}  // namespace tern::server
