// The C API's chat completions (include/tern.h, "Chat completions") over runtime/chat: the
// request's arrays pass through as they are (the structs share their layouts), its enums
// and sampler are converted, and events go back out as tern_chat_event.
#include <cstddef>
#include <memory>
#include <new>

#include "include/tern.h"
#include "runtime/api/c_api_support.h"
#include "runtime/chat/chat_completion.h"
#include "runtime/engine/model.h"
#include "runtime/engine/session.h"
#include "runtime/structured/json_schema.h"

namespace tern {

namespace {

#define TERN_SAME_LAYOUT_(c, cpp, field)                                                     \
  static_assert(offsetof(c, field) == offsetof(cpp, field) && sizeof(c) == sizeof(cpp), #c); \
  static_assert(sizeof(static_cast<c*>(nullptr)->field) == sizeof(static_cast<cpp*>(nullptr)->field), #field);
TERN_SAME_LAYOUT_(tern_tool_call, chat::ToolCall, arguments)
TERN_SAME_LAYOUT_(tern_chat_turn, chat::Turn, tool_call_id)
TERN_SAME_LAYOUT_(tern_chat_turn, chat::Turn, n_tool_calls)
TERN_SAME_LAYOUT_(tern_chat_tool, chat::Tool, parameters)
TERN_SAME_LAYOUT_(tern_logit_bias, LogitBias, bias)
TERN_SAME_LAYOUT_(tern_token_logprob, chat::TokenLogprobView, size)
#undef TERN_SAME_LAYOUT_
static_assert(static_cast<int>(chat::ToolChoice::Function) == TERN_TOOL_CHOICE_FUNCTION, "tool choices");
static_assert(static_cast<int>(chat::ResponseFormat::Grammar) == TERN_RESPONSE_GRAMMAR, "response formats");
static_assert(static_cast<int>(chat::FinishReason::ToolCalls) == TERN_FINISH_TOOL_CALLS, "finish reasons");
static_assert(static_cast<int>(chat::EventType::Token) == TERN_CHAT_TOKEN, "event types");

chat::Request request_from(const tern_chat_request& c) {
  chat::Request r;
  r.messages = reinterpret_cast<const chat::Turn*>(c.messages);
  r.n_messages = c.n_messages;
  r.prompt = c.prompt;
  r.prompt_size = c.prompt_size;
  r.tools = reinterpret_cast<const chat::Tool*>(c.tools);
  r.n_tools = c.n_tools;
  r.tool_choice = static_cast<chat::ToolChoice>(c.tool_choice);
  r.tool_name = c.tool_name;
  r.response_format = static_cast<chat::ResponseFormat>(c.response_format);
  r.response_schema = c.response_schema;
  r.grammar = c.grammar;
  r.sampler = to_cpp(c.sampler);
  r.logit_bias = reinterpret_cast<const LogitBias*>(c.logit_bias);
  r.n_logit_bias = c.n_logit_bias;
  r.max_tokens = c.max_tokens;
  r.stop_strings = c.stop_strings;
  r.n_stop_strings = c.n_stop_strings;
  r.logprobs = c.logprobs != 0;
  r.top_logprobs = c.top_logprobs;
  r.prompt_tokens = c.prompt_tokens;
  r.n_prompt_tokens = c.n_prompt_tokens;
  return r;
}

struct Forward {
  tern_chat_callback callback;
  void* user;
  static int call(const chat::Event& e, void* self) {
    const auto* f = static_cast<const Forward*>(self);
    const tern_chat_event c{static_cast<tern_chat_event_type>(e.type),
                            e.text,
                            e.size,
                            e.tool_call_index,
                            reinterpret_cast<const tern_token_logprob*>(e.token),
                            reinterpret_cast<const tern_token_logprob*>(e.top),
                            e.n_top};
    return f->callback(&c, f->user);
  }
};

}  // namespace

}  // namespace tern

using namespace tern;

extern "C" {

tern_chat_request tern_chat_default_request(void) {
  tern_chat_request r{};
  r.sampler = tern_sampler_default_params();
  r.tool_choice = TERN_TOOL_CHOICE_AUTO;
  r.response_format = TERN_RESPONSE_TEXT;
  return r;
}

tern_status tern_chat_complete(tern_session* session, const tern_chat_request* request, tern_chat_callback callback,
                               void* user_data, tern_chat_result* out_result) {
  TERN_C_REQUIRE_(session);
  TERN_C_REQUIRE_(request);
  if (out_result != nullptr) *out_result = tern_chat_result{};
  Forward forward{callback, user_data};
  chat::ChatResult result;
  const Error e = chat::complete(*reinterpret_cast<Session*>(session), request_from(*request),
                                 callback != nullptr ? &Forward::call : nullptr, &forward, &result);
  if (out_result != nullptr) {
    out_result->finish_reason = static_cast<tern_finish_reason>(result.finish_reason);
    out_result->stop_reason = static_cast<tern_stop_reason>(result.stop_reason);
    out_result->n_tool_calls = result.n_tool_calls;
    out_result->prompt_tokens = result.prompt_tokens;
    out_result->cached_tokens = result.cached_tokens;
    out_result->completion_tokens = result.completion_tokens;
    out_result->prefill_seconds = result.prefill_seconds;
    out_result->decode_seconds = result.decode_seconds;
  }
  return status(e);
}

tern_status tern_chat_prompt(const tern_model* model, const tern_chat_request* request, char* buf, size_t capacity,
                             size_t* out_size) {
  TERN_C_REQUIRE_(model);
  TERN_C_REQUIRE_(request);
  TERN_C_REQUIRE_(out_size);
  if (buf == nullptr && capacity != 0) return null_argument(__func__, "buf");
  return status(
      chat::prompt_text(*reinterpret_cast<const Model*>(model), request_from(*request), buf, capacity, out_size));
}

tern_status tern_chat_grammar(const tern_model* model, const tern_chat_request* request, char* buf, size_t capacity,
                              size_t* out_size) {
  TERN_C_REQUIRE_(model);
  TERN_C_REQUIRE_(request);
  TERN_C_REQUIRE_(out_size);
  *out_size = 0;
  if (buf == nullptr && capacity != 0) return null_argument(__func__, "buf");
  const Model& m = *reinterpret_cast<const Model*>(model);
  const chat::Request r = request_from(*request);
  const Error invalid = chat::validate(r, m.chat_format());
  if (invalid != Error::Ok) return status(invalid);
  // The composed schema and the grammar: room that doubles until they fit.
  const size_t work_bytes = json_schema_work_bytes();
  std::unique_ptr<char[]> work(new (std::nothrow) char[work_bytes]);
  if (work == nullptr) return status(fail(Error::OutOfMemory, "tern_chat_grammar: no memory"));
  for (size_t scratch_bytes = 1 << 16;; scratch_bytes *= 2) {
    std::unique_ptr<char[]> scratch(new (std::nothrow) char[scratch_bytes]);
    if (scratch == nullptr) return status(fail(Error::OutOfMemory, "tern_chat_grammar: no memory"));
    const Error e =
        chat::grammar_text(r, buf, capacity, out_size, work.get(), work_bytes, scratch.get(), scratch_bytes);
    if (e != Error::GrammarTooLarge || scratch_bytes >= (size_t{1} << 30)) return status(e);
  }
}

}  // extern "C"
