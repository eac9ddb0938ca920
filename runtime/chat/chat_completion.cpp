#include "runtime/chat/chat_completion.h"

#include <cstring>

#include "platform/clock.h"
#include "runtime/chat/reply_grammar.h"
#include "runtime/chat/tool_call_scanner.h"
#include "runtime/chat/tool_prompt.h"
#include "runtime/engine/model.h"

namespace tern::chat {

namespace {

// The reply's pieces as events: content, or a call's name and arguments.
class EventSink final : public ToolCallScanner::Sink {
 public:
  EventSink(EventCallback callback, void* user) : callback_(callback), user_(user) {}
  bool content(const char* text, size_t size) override { return emit(EventType::Content, text, size); }
  bool call(const char* name, size_t size) override { return emit(EventType::ToolCall, name, size); }
  bool arguments(const char* text, size_t size) override { return emit(EventType::ToolArguments, text, size); }
  bool token(const TokenLogprobView& chosen, const TokenLogprobView* top, size_t n_top) {
    if (callback_ == nullptr) return true;
    const Event e{EventType::Token, nullptr, 0, 0, &chosen, top, n_top};
    return callback_(e, user_) == 0;
  }
  bool emit(EventType type, const char* text, size_t size) {
    if (callback_ == nullptr) return true;
    const Event e{type, text, size, 0, nullptr, nullptr, 0};
    return callback_(e, user_) == 0;
  }

 private:
  EventCallback callback_;
  void* user_;
};

struct Run {
  ToolCallScanner* scanner;
  EventSink* sink;
  const Session* session;
  bool stopped = false;  // the callback asked to stop on a token event
  static bool piece(const char* text, size_t size, void* user) {
    auto* self = static_cast<Run*>(user);
    return !self->stopped && self->scanner->push(text, size);
  }
  // A token's log-probabilities, as an event before its text.
  static void token(int32_t id, float logprob, const TokenLogprob* top, uint32_t n_top, void* user) {
    auto* self = static_cast<Run*>(user);
    if (self->stopped) return;
    auto view = [self](int32_t t, float lp) {
      const PieceView text = self->session->token_text(t);
      return TokenLogprobView{t, lp, text.data, text.size};
    };
    const TokenLogprobView chosen = view(id, logprob);
    TokenLogprobView alternatives[kMaxTopLogprobs];
    for (uint32_t i = 0; i < n_top; ++i) alternatives[i] = view(top[i].token, top[i].logprob);
    self->stopped = !self->sink->token(chosen, alternatives, n_top);
  }
};

// The grammar the reply follows, set on the session (a text it holds compiled only restarts).
Error set_reply_grammar(Session& s, const Request& r) {
  const char* grammar = nullptr;
  size_t size = 0;
  TERN_RETURN_IF_ERROR(
      reply_grammar(r, s.chat_text(), s.chat_text_bytes(), s.chat_work(), s.chat_work_bytes(), &grammar, &size));
  return s.set_grammar(size > 0 ? grammar : nullptr, size);
}

// The prompt's tokens in the session's prompt buffer: a chat rendered in the slot's chat
// memory (it carries the BOS text), or the completion prompt after a BOS.
Result<size_t> encode_request_prompt(Session& s, const Request& r) {
  if (!r.chat()) return s.encode_prompt(r.prompt, r.prompt_size, true, true);
  Model& m = s.model();
  size_t size = 0;
  const Error e = render_prompt(m.chat_format(), m.tokenizer(), r, s.chat_text(), s.chat_text_bytes(), &size);
  if (e == Error::OutOfRange) {
    return fail(Error::PromptTooLong,
                "the chat renders to %zu bytes of text; the session's chat memory holds %zu (64 KiB and 16 bytes "
                "per context token)",
                size, s.chat_text_bytes());
  }
  TERN_RETURN_IF_ERROR(e);
  return s.encode_prompt(s.chat_text(), size, false, true);
}

FinishReason finish_reason(StopReason stop, const ToolCallScanner& scanner) {
  if (scanner.complete_call()) return FinishReason::ToolCalls;
  return stop == StopReason::MaxTokens || stop == StopReason::ContextFull ? FinishReason::Length : FinishReason::Stop;
}

}  // namespace

Error complete(Session& s, const Request& r, EventCallback callback, void* user, ChatResult* result) {
  ChatResult local;
  ChatResult& out = result != nullptr ? *result : local;
  out = ChatResult{};
  Model& m = s.model();
  TERN_CHECK_OR_RETURN(m.tokenizer() != nullptr, Error::InvalidState, "the model has no tokenizer (not from a bundle)");
  TERN_CHECK_OR_RETURN(!m.config().embedding, Error::NotSupported,
                       "an embedding model does not generate text: embed texts instead");
  TERN_RETURN_IF_ERROR(validate(r, m.chat_format()));
  TERN_RETURN_IF_ERROR(s.set_sampler(r.sampler));
  TERN_RETURN_IF_ERROR(s.set_logit_bias(r.logit_bias, r.n_logit_bias));
  TERN_RETURN_IF_ERROR(set_reply_grammar(s, r));

  const uint64_t t0 = monotonic_ns();
  const int32_t* tokens = r.prompt_tokens;
  size_t n = r.n_prompt_tokens;
  if (tokens == nullptr) {
    TERN_ASSIGN_OR_RETURN(n, encode_request_prompt(s, r));
    tokens = s.prompt_tokens();
  }
  TERN_CHECK_OR_RETURN(n > 0, Error::InvalidArgument, "the prompt is empty: nothing to condition on");
  TERN_CHECK_OR_RETURN(s.evicting() || n < s.context_tokens(), Error::PromptTooLong,
                       "the prompt is %zu tokens; the %u-token context holds %u and the reply", n, s.context_tokens(),
                       s.context_tokens() - 1);
  TERN_ASSIGN_OR_RETURN(const uint32_t cached, s.prefill_reusing(tokens, n));
  out.prompt_tokens = static_cast<uint32_t>(n);
  out.cached_tokens = cached;
  out.prefill_seconds = seconds_between(t0, monotonic_ns());

  const char* stops[kMaxStopStrings];
  size_t n_stops = 0;
  for (size_t i = 0; i < r.n_stop_strings; ++i) stops[n_stops++] = r.stop_strings[i];
  if (r.chat() && m.chat_format().stop != nullptr) stops[n_stops++] = m.chat_format().stop;
  GenerateOptions options;
  const uint32_t room = s.evicting() ? s.context_tokens() : s.context_tokens() - static_cast<uint32_t>(n);
  options.max_new_tokens = r.max_tokens > 0 ? r.max_tokens : room;
  options.add_bos = false;
  options.stop_strings = n_stops > 0 ? stops : nullptr;
  options.stop_string_count = n_stops;

  EventSink sink(callback, user);
  // With tool_choice function only that one may be called.
  const bool named = r.tool_choice == ToolChoice::Function;
  const Tool* callable = named ? nullptr : r.tools;
  size_t n_callable = r.offers_tools() && !named ? r.n_tools : 0;
  for (size_t i = 0; named && i < r.n_tools; ++i) {
    if (std::strcmp(r.tools[i].name, r.tool_name) == 0) callable = &r.tools[i], n_callable = 1;
  }
  ToolCallScanner scanner(callable, n_callable, sink);
  Run run{&scanner, &sink, &s};
  if (r.logprobs) {
    options.logprobs_top = r.top_logprobs;
    options.on_token = &Run::token;
    options.token_user = &run;
  }
  GenerateStats stats;
  TERN_RETURN_IF_ERROR(s.generate("", 0, options, &Run::piece, &run, &stats));
  const bool cut = stats.stop_reason == StopReason::MaxTokens || stats.stop_reason == StopReason::ContextFull;
  const bool finished = !run.stopped && scanner.finish(cut);
  out.stop_reason = finished ? stats.stop_reason : StopReason::Callback;
  out.finish_reason = finish_reason(out.stop_reason, scanner);
  out.n_tool_calls = scanner.kind() == ToolCallScanner::Kind::Call ? 1 : 0;
  out.completion_tokens = stats.generated_tokens;
  out.decode_seconds = stats.decode_seconds;
  return Error::Ok;
}

Error prompt_text(const Model& model, const Request& r, char* buf, size_t capacity, size_t* size) {
  *size = 0;
  TERN_CHECK_OR_RETURN(model.tokenizer() != nullptr, Error::InvalidState, "the model has no tokenizer");
  TERN_RETURN_IF_ERROR(validate(r, model.chat_format()));
  if (r.chat()) return render_prompt(model.chat_format(), model.tokenizer(), r, buf, capacity, size);
  TERN_CHECK_OR_RETURN(r.prompt != nullptr, Error::InvalidArgument,
                       "a prompt given as token ids has no text: tern_detokenize them");
  *size = r.prompt_size;
  TERN_CHECK_OR_RETURN(r.prompt_size < capacity, Error::OutOfRange, "the prompt is %zu bytes; the buffer holds %zu",
                       r.prompt_size, capacity);
  std::memcpy(buf, r.prompt, r.prompt_size);
  buf[r.prompt_size] = '\0';
  return Error::Ok;
}

Error grammar_text(const Request& r, char* buf, size_t capacity, size_t* size, void* work, size_t work_bytes,
                   char* scratch, size_t scratch_bytes) {
  *size = 0;
  const char* grammar = nullptr;
  size_t n = 0;
  TERN_RETURN_IF_ERROR(reply_grammar(r, scratch, scratch_bytes, work, work_bytes, &grammar, &n));
  *size = n;
  TERN_CHECK_OR_RETURN(n < capacity, Error::OutOfRange, "the grammar is %zu bytes; the buffer holds %zu", n, capacity);
  std::memcpy(buf, grammar, n);
  buf[n] = '\0';
  return Error::Ok;
}

}  // namespace tern::chat
