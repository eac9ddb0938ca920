// Running a generation request on a session slot (generation.h).
#include "tools/server/generation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>

#include "tools/server/structured_output.h"

namespace tern::server {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

ApiError status_error(tern_status st, const char* what) {
  ApiError e;
  e.status =
      st == TERN_INVALID_TOKEN || st == TERN_INVALID_UTF8 || st == TERN_INVALID_ARGUMENT || st == TERN_PROMPT_TOO_LONG
          ? 400
          : 500;
  if (e.status == 500) e.type = "server_error";
  e.message = std::string(what) + ": " + tern_last_error_message() + " (" + tern_status_string(st) + ")";
  return e;
}

namespace {

// The field a grammar's failure is reported on.
const char* structured_param(const GenerationRequest& r) {
  return r.structured.format == StructuredOutput::Format::Grammar ? "grammar"
         : r.structured.tools.empty()                             ? "response_format"
                                                                  : "tools";
}

}  // namespace

// A grammar that cannot be compiled is the request's fault (400), also when it needs more
// than --grammar-memory or longer than --grammar-compile-ms.
SlotGrammar set_slot_grammar(ServerState& s, size_t slot, const GenerationRequest& r, const Prepared& p,
                             std::function<bool()> gone) {
  SlotGrammar out;
  tern_session* session = s.sessions[slot];
  const GrammarKey key = grammar_key(p.grammar);
  if (p.grammar.empty()) {
    tern_session_set_grammar(session, nullptr, 0);
    s.pool->set_grammar(slot, key);
    out.ok = true;
    return out;
  }
  // The library skips the compile when the text's hash and length are those it holds.
  out.reused = s.pool->grammar(slot) == key;
  tern_session_clear_abort(session);
  const double start = now_s();
  const uint64_t watch =
      s.watchdog->watch(session, std::chrono::milliseconds(s.opt.grammar_compile_ms), std::move(gone));
  const tern_status st = tern_session_set_grammar(session, p.grammar.data(), p.grammar.size());
  const CompileWatchdog::Outcome outcome = s.watchdog->unwatch(watch);
  tern_session_clear_abort(session);
  out.compile_ms = (now_s() - start) * 1e3;
  s.pool->set_grammar(slot, st == TERN_OK ? key : GrammarKey{});  // a failed call leaves no grammar
  if (st == TERN_OK) {
    ++(out.reused ? s.grammar.reused : s.grammar.compiled);
    if (!out.reused) s.grammar.compile_us += static_cast<uint64_t>(out.compile_ms * 1e3);
    out.ok = true;
    return out;
  }
  out.reused = false;
  if (st == TERN_ABORTED && outcome == CompileWatchdog::Outcome::ClientGone) {
    out.error = ApiError{499, "the client left", "", "", ""};
    return out;
  }
  out.error = status_error(st, "grammar");
  out.error.status = 400;
  out.error.type = "invalid_request_error";
  out.error.param = r.structured.format == StructuredOutput::Format::Grammar ? "grammar"
                    : r.structured.tools.empty()                             ? "response_format"
                                                                             : "tools";
  if (st == TERN_GRAMMAR_TOO_LARGE) {
    out.error.code = "grammar_too_large";
    ++s.grammar.too_large;
  } else if (st == TERN_ABORTED) {
    out.error.code = "grammar_compile_timeout";
    out.error.message = "the grammar took longer than this server's limit of " +
                        std::to_string(s.opt.grammar_compile_ms) +
                        " ms to compile (--grammar-compile-ms); a simpler schema (fewer properties, fewer bounded "
                        "strings and arrays) compiles faster";
    ++s.grammar.timed_out;
  }
  return out;
}

namespace {

// The reply's grammar as the library will make it, converted once per structure.
bool request_grammar(ServerState& s, const GenerationRequest& r, const ChatCall& call, std::string* grammar,
                     ApiError* e) {
  if (schema_grammar_cache().find(call.structure(), grammar)) return true;
  size_t size = 0;
  tern_status st = tern_chat_grammar(s.model, &call.request(), nullptr, 0, &size);
  std::vector<char> buf(size + 1);
  if (st == TERN_OUT_OF_RANGE) st = tern_chat_grammar(s.model, &call.request(), buf.data(), buf.size(), &size);
  if (st != TERN_OK) {
    *e = status_error(st, structured_param(r));
    if (st == TERN_OUT_OF_MEMORY || st == TERN_INTERNAL) return false;
    e->status = 400;  // a schema or grammar the library cannot honour is the request's
    e->type = "invalid_request_error";
    e->param = structured_param(r);
    e->message = std::string(e->param) + ": " + tern_last_error_message();
    return false;
  }
  grammar->assign(buf.data(), size);
  schema_grammar_cache().insert(call.structure(), *grammar);
  return true;
}

// The prompt's tokens as the library will run them (its length is checked before a slot is taken).
bool prompt_tokens(ServerState& s, const GenerationRequest& r, const ChatCall& call, std::vector<int32_t>* ids,
                   ApiError* e) {
  const tern_chat_request& c = call.request();
  if (c.prompt_tokens != nullptr) {
    ids->assign(c.prompt_tokens, c.prompt_tokens + c.n_prompt_tokens);
    return true;
  }
  size_t size = 0;
  tern_status st = tern_chat_prompt(s.model, &call.request(), nullptr, 0, &size);
  std::vector<char> text(size + 1);
  if (st == TERN_OK || st == TERN_OUT_OF_RANGE) {
    st = tern_chat_prompt(s.model, &call.request(), text.data(), text.size(), &size);
  }
  if (st != TERN_OK) {
    *e = status_error(st, r.chat ? "messages" : "prompt");
    e->param = r.chat ? "messages" : "prompt";
    return false;
  }
  ids->resize(size + 2);
  size_t count = 0;
  st = tern_tokenize(s.model, text.data(), size, r.chat ? 0 : 1, 1, ids->data(), ids->size(), &count);
  if (st != TERN_OK) {
    *e = status_error(st, "tokenize");
    return false;
  }
  ids->resize(count);
  return true;
}

}  // namespace

Prepared prepare(ServerState& s, const GenerationRequest& r) {
  Prepared p;
  p.call = std::make_shared<ChatCall>(r);
  if (!request_grammar(s, r, *p.call, &p.grammar, &p.error)) return p;
  if (!prompt_tokens(s, r, *p.call, &p.ids, &p.error)) return p;
  const auto n = static_cast<uint32_t>(p.ids.size());
  const uint32_t ctx = s.info.context_tokens;
  const char* param = r.chat ? "messages" : "prompt";
  if (n == 0) {
    p.error = ApiError{400, "the prompt is empty", "invalid_request_error", param, ""};
    return p;
  }
  if (!s.evicting && n >= ctx) {
    p.error = ApiError{400,
                       "This model's context holds " + std::to_string(ctx) + " tokens; the prompt is " +
                           std::to_string(n) + " tokens (and the reply needs at least one more)",
                       "invalid_request_error", param, "context_length_exceeded"};
    return p;
  }
  int64_t max_tokens = r.max_tokens;
  if (max_tokens < 0) max_tokens = s.evicting ? 4096 : static_cast<int64_t>(ctx - n);
  if (!s.evicting && max_tokens > static_cast<int64_t>(ctx - n)) {
    p.error = ApiError{400,
                       "max_tokens " + std::to_string(max_tokens) + " is beyond the context: the prompt takes " +
                           std::to_string(n) + " of its " + std::to_string(ctx) + " tokens",
                       "invalid_request_error", "max_tokens", "context_length_exceeded"};
    return p;
  }
  p.call->set_max_tokens(static_cast<uint32_t>(std::min<int64_t>(max_tokens, UINT32_MAX)));
  p.ok = true;
  return p;
}

size_t shared_prefix(tern_session* session, const std::vector<int32_t>& ids) {
  uint32_t position = 0;
  if (tern_session_position(session, &position) != TERN_OK || position == 0) return 0;
  std::vector<int32_t> held(position);
  size_t n = 0;
  if (tern_session_history(session, held.data(), held.size(), &n) != TERN_OK || n != position) return 0;
  size_t k = 0;
  while (k < n && k < ids.size() && held[k] == ids[k]) ++k;
  return k;
}

namespace {

// tern_chat_complete's events into a Generation, passed on to the caller's.
struct Collector {
  Generation* g;
  GenerationEvents* events;
  double start;
  static int call(const tern_chat_event* e, void* user) {
    auto* self = static_cast<Collector*>(user);
    Generation& g = *self->g;
    const std::string text(e->text != nullptr ? e->text : "", e->size);
    if (e->type != TERN_CHAT_TOKEN && g.first_piece_s < 0) g.first_piece_s = now_s() - self->start;
    bool go_on = true;
    switch (e->type) {
      case TERN_CHAT_CONTENT:
        g.text += text;
        go_on = self->events == nullptr || self->events->content(text);
        break;
      case TERN_CHAT_TOOL_CALL:
        g.call = true;
        g.call_name = text;
        go_on = self->events == nullptr || self->events->call(text);
        break;
      case TERN_CHAT_TOOL_ARGUMENTS:
        g.call_arguments += text;
        go_on = self->events == nullptr || self->events->arguments(text);
        break;
      case TERN_CHAT_TOKEN: {
        TokenLogprob t;
        t.token.assign(e->token->text, e->token->size);
        t.logprob = e->token->logprob;
        for (size_t i = 0; i < e->n_top; ++i)
          t.top.emplace_back(std::string(e->top[i].text, e->top[i].size), e->top[i].logprob);
        go_on = self->events == nullptr || self->events->token(t);
        g.logprobs.push_back(std::move(t));
        break;
      }
    }
    return go_on ? 0 : 1;
  }
};

}  // namespace

Generation generate(ServerState& s, tern_session* session, const Prepared& p, GenerationEvents* events) {
  Generation g;
  Collector collector{&g, events, now_s()};
  tern_session_clear_abort(session);
  tern_chat_result result{};
  const tern_status st = tern_chat_complete(session, &p.call->request(), &Collector::call, &collector, &result);
  if (st != TERN_OK) {
    g.error = status_error(st, "generate");
    if (st == TERN_INVALID_TOKEN) g.error.param = "logit_bias";
    tern_session_reset(session);
    return g;
  }
  g.prompt_tokens = result.prompt_tokens;
  g.reused_tokens = result.cached_tokens;
  g.completion_tokens = result.completion_tokens;
  g.decode_seconds = result.decode_seconds;
  g.finish_reason = result.finish_reason == TERN_FINISH_TOOL_CALLS ? "tool_calls"
                    : result.finish_reason == TERN_FINISH_LENGTH   ? "length"
                                                                   : "stop";
  g.ok = true;
  return g;
}

}  // namespace tern::server
