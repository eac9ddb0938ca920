// A chat or completion request as the chat engine takes it, its events and its result: the
// C API's tern_chat_* structs (include/tern.h, "Chat completions"; the turn, tool and call
// structs have these layouts, so the C API passes arrays through as they are).
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/engine/sampler.h"
#include "runtime/engine/session.h"
#include "runtime/text/chat.h"

namespace tern::chat {

struct ToolCall {
  const char* id;  // not shown to the model
  const char* name;
  const char* arguments;  // JSON text
};

struct Turn {
  const char* role;     // system, developer, user, assistant, tool
  const char* content;  // null: none
  const ToolCall* tool_calls;
  size_t n_tool_calls;
  const char* tool_call_id;  // not shown to the model
};

struct Tool {
  const char* name;
  const char* description;  // null: none
  const char* parameters;   // JSON Schema text; null: any object
};

enum class ToolChoice : int32_t { Auto = 0, None = 1, Required = 2, Function = 3 };
enum class ResponseFormat : int32_t { Text = 0, JsonObject = 1, JsonSchema = 2, Grammar = 3 };
enum class FinishReason : int32_t { Stop = 0, Length = 1, ToolCalls = 2 };

inline constexpr size_t kMaxFunctionName = 64;

struct Request {
  const Turn* messages = nullptr;  // a chat, or null for a completion of `prompt`
  size_t n_messages = 0;
  const char* prompt = nullptr;
  size_t prompt_size = 0;
  const Tool* tools = nullptr;
  size_t n_tools = 0;
  ToolChoice tool_choice = ToolChoice::Auto;
  const char* tool_name = nullptr;
  ResponseFormat response_format = ResponseFormat::Text;
  const char* response_schema = nullptr;
  const char* grammar = nullptr;
  SamplerParams sampler;
  const LogitBias* logit_bias = nullptr;
  size_t n_logit_bias = 0;
  uint32_t max_tokens = 0;  // 0: up to the context
  const char* const* stop_strings = nullptr;
  size_t n_stop_strings = 0;
  bool logprobs = false;
  uint32_t top_logprobs = 0;
  const int32_t* prompt_tokens = nullptr;  // a completion's prompt as ids, run as given
  size_t n_prompt_tokens = 0;

  bool chat() const { return messages != nullptr; }
  // Tools the reply may call (offered and not turned off by tool_choice none).
  bool offers_tools() const { return n_tools > 0 && tool_choice != ToolChoice::None; }
};

struct TokenLogprobView {
  int32_t token;
  float logprob;
  const char* text;  // the token's bytes
  size_t size;
};

enum class EventType : int32_t { Content = 0, ToolCall = 1, ToolArguments = 2, Token = 3 };

struct Event {
  EventType type;
  const char* text;
  size_t size;
  uint32_t tool_call_index;
  const TokenLogprobView* token;
  const TokenLogprobView* top;
  size_t n_top;
};
// Nonzero: stop generating.
using EventCallback = int (*)(const Event& event, void* user);

struct ChatResult {
  FinishReason finish_reason = FinishReason::Stop;
  StopReason stop_reason = StopReason::MaxTokens;
  uint32_t n_tool_calls = 0;
  uint32_t prompt_tokens = 0;
  uint32_t cached_tokens = 0;
  uint32_t completion_tokens = 0;
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;
};

// InvalidArgument naming the field a request gets wrong (roles, UTF-8, names, choices).
Error validate(const Request& r, const ChatFormatView& format);

}  // namespace tern::chat
