#include "runtime/chat/chat_request.h"

#include <cstring>

#include "runtime/engine/stop_strings.h"

namespace tern::chat {

namespace {

bool valid_function_name(const char* n) {
  const size_t size = n != nullptr ? std::strlen(n) : 0;
  if (size == 0 || size > kMaxFunctionName) return false;
  for (size_t i = 0; i < size; ++i) {
    const char c = n[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

Error validate_messages(const Request& r, const ChatFormatView& format) {
  TERN_CHECK_OR_RETURN(r.n_messages > 0, Error::InvalidArgument, "messages: a chat needs at least one message");
  for (size_t i = 0; i < r.n_messages; ++i) {
    const Turn& m = r.messages[i];
    TERN_RETURN_IF_ERROR(chat_role(format, m.role, i).error());
    if (m.content != nullptr) TERN_RETURN_IF_ERROR(check_chat_utf8(m.content, std::strlen(m.content), i));
    const bool assistant = std::strcmp(m.role, "assistant") == 0;
    TERN_CHECK_OR_RETURN(m.n_tool_calls == 0 || assistant, Error::InvalidArgument,
                         "messages[%zu]: only an assistant message has tool_calls", i);
    TERN_CHECK_OR_RETURN(m.n_tool_calls == 0 || m.tool_calls != nullptr, Error::InvalidArgument,
                         "messages[%zu]: null tool_calls", i);
    TERN_CHECK_OR_RETURN(m.content != nullptr || m.n_tool_calls > 0, Error::InvalidArgument,
                         "messages[%zu] has no content", i);
    for (size_t c = 0; c < m.n_tool_calls; ++c) {
      const ToolCall& call = m.tool_calls[c];
      TERN_CHECK_OR_RETURN(call.name != nullptr, Error::InvalidArgument, "messages[%zu].tool_calls[%zu] has no name", i,
                           c);
      TERN_RETURN_IF_ERROR(check_chat_utf8(call.name, std::strlen(call.name), i));
      if (call.arguments != nullptr) {
        TERN_RETURN_IF_ERROR(check_chat_utf8(call.arguments, std::strlen(call.arguments), i));
      }
    }
  }
  return Error::Ok;
}

Error validate_tools(const Request& r) {
  TERN_CHECK_OR_RETURN(r.n_tools == 0 || r.chat(), Error::InvalidArgument, "tools: only a chat offers tools");
  TERN_CHECK_OR_RETURN(r.n_tools == 0 || r.tools != nullptr, Error::InvalidArgument, "tools: null");
  for (size_t i = 0; i < r.n_tools; ++i) {
    const Tool& t = r.tools[i];
    TERN_CHECK_OR_RETURN(valid_function_name(t.name), Error::InvalidArgument,
                         "tools[%zu]: a function name is 1 to 64 of a-z, A-Z, 0-9, _ and -", i);
    for (size_t j = 0; j < i; ++j) {
      TERN_CHECK_OR_RETURN(std::strcmp(r.tools[j].name, t.name) != 0, Error::InvalidArgument,
                           "tools: the function '%s' is listed twice", t.name);
    }
    if (t.description != nullptr) TERN_RETURN_IF_ERROR(check_chat_utf8(t.description, std::strlen(t.description), i));
  }
  const int choice = static_cast<int>(r.tool_choice);
  TERN_CHECK_OR_RETURN(choice >= 0 && choice <= 3, Error::InvalidArgument, "tool_choice: %d is not a choice", choice);
  if (r.tool_choice == ToolChoice::Function) {
    bool known = false;
    for (size_t i = 0; i < r.n_tools && r.tool_name != nullptr; ++i)
      known |= std::strcmp(r.tools[i].name, r.tool_name) == 0;
    TERN_CHECK_OR_RETURN(known, Error::InvalidArgument, "tool_choice names '%.64s', which is not in tools",
                         r.tool_name != nullptr ? r.tool_name : "");
  }
  TERN_CHECK_OR_RETURN(r.tool_choice == ToolChoice::Auto || r.tool_choice == ToolChoice::None || r.n_tools > 0,
                       Error::InvalidArgument, "tool_choice: a call is required but there are no tools");
  return Error::Ok;
}

}  // namespace

Error validate(const Request& r, const ChatFormatView& format) {
  if (r.chat()) {
    TERN_CHECK_OR_RETURN(r.prompt == nullptr && r.prompt_tokens == nullptr, Error::InvalidArgument,
                         "a chat (messages) has no prompt or prompt_tokens");
    TERN_RETURN_IF_ERROR(validate_messages(r, format));
  } else {
    TERN_CHECK_OR_RETURN((r.prompt != nullptr) != (r.prompt_tokens != nullptr), Error::InvalidArgument,
                         "a request needs messages (a chat), or a prompt or prompt_tokens (a completion), and only "
                         "one of them");
  }
  TERN_RETURN_IF_ERROR(validate_tools(r));
  const int format_id = static_cast<int>(r.response_format);
  TERN_CHECK_OR_RETURN(format_id >= 0 && format_id <= 3, Error::InvalidArgument, "response_format: %d is not a format",
                       format_id);
  TERN_CHECK_OR_RETURN(r.response_format != ResponseFormat::JsonSchema || r.response_schema != nullptr,
                       Error::InvalidArgument, "response_format json_schema needs a schema");
  TERN_CHECK_OR_RETURN(r.response_format != ResponseFormat::Grammar || r.grammar != nullptr, Error::InvalidArgument,
                       "response_format grammar needs a grammar");
  TERN_CHECK_OR_RETURN(r.response_format != ResponseFormat::Grammar || !r.offers_tools(), Error::InvalidArgument,
                       "a grammar and tools cannot both hold the reply");
  TERN_CHECK_OR_RETURN(!r.logprobs || r.top_logprobs <= kMaxTopLogprobs, Error::InvalidArgument,
                       "top_logprobs %u: at most %u", r.top_logprobs, kMaxTopLogprobs);
  const size_t stops = r.n_stop_strings + (r.chat() && format.stop != nullptr ? 1 : 0);
  TERN_CHECK_OR_RETURN(stops <= kMaxStopStrings, Error::InvalidArgument,
                       "stop: %zu strings; at most %zu with the chat format's own", stops, kMaxStopStrings);
  return check_stop_strings(r.stop_strings, r.n_stop_strings);
}

}  // namespace tern::chat
