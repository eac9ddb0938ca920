// Running one generation request on a session slot through the library's chat engine
// (tern_chat_complete): the request made ready (its grammar, its prompt's length checked
// against the context), then run, its events streamed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "include/tern.h"
#include "tools/server/chat_call.h"
#include "tools/server/server_api.h"
#include "tools/server/server_state.h"

namespace tern::server {

// Seconds on the steady clock.
double now_s();

// A failed C API call as the API error it is: 400 for what the request got wrong, else 500.
ApiError status_error(tern_status st, const char* what);

// A request made ready to run. Done before a slot is taken, so a bad request is answered
// with its 4xx (also when streaming) at once.
struct Prepared {
  std::shared_ptr<ChatCall> call;  // points into the request, which must outlive it
  std::string grammar;             // what the reply must follow (response_format, tools); empty: nothing
  std::vector<int32_t> ids;        // the prompt's tokens, as the engine will run them
  bool ok = false;
  ApiError error;
};

// One generated token's log-probability and its alternatives (OpenAI's logprobs).
struct TokenLogprob {
  std::string token;  // the token's bytes (may be part of a UTF-8 character)
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;
};

struct Generation {
  std::string text;   // the reply's content
  bool call = false;  // the reply is a tool call (complete, or cut by max_tokens)
  std::string call_name, call_arguments;
  std::vector<TokenLogprob> logprobs;
  uint32_t prompt_tokens = 0, completion_tokens = 0;
  std::string finish_reason = "stop";  // "stop", "length" or "tool_calls"
  uint32_t reused_tokens = 0;
  double first_piece_s = -1, decode_seconds = 0;
  ApiError error;
  bool ok = false;
};

Prepared prepare(ServerState& s, const GenerationRequest& r);

// How many of `ids` begin what `session` holds (0 when it holds something else).
size_t shared_prefix(tern_session* session, const std::vector<int32_t>& ids);

// The request's grammar (none: the slot's last one is removed) set on its slot's session,
// before the reply starts: reused when the slot holds it compiled, else compiled under the
// watchdog, stopped after --grammar-compile-ms or once `gone` says the client has left.
struct SlotGrammar {
  bool ok = false;
  bool reused = false;
  double compile_ms = 0;
  ApiError error;  // 400 (grammar_compile_timeout, grammar_too_large, invalid) or 499
};
SlotGrammar set_slot_grammar(ServerState& s, size_t slot, const GenerationRequest& r, const Prepared& p,
                             std::function<bool()> gone);

// What a running generation says, in order: content, a call's name and its arguments, a
// token's log-probabilities (before its text). false: stop (the client is gone).
struct GenerationEvents {
  virtual ~GenerationEvents() = default;
  virtual bool content(const std::string& text) = 0;
  virtual bool call(const std::string& name) = 0;
  virtual bool arguments(const std::string& text) = 0;
  virtual bool token(const TokenLogprob& t) = 0;
};

// Runs a prepared request on one slot's session (its grammar set); `events` may be null.
Generation generate(ServerState& s, tern_session* session, const Prepared& p, GenerationEvents* events);

}  // namespace tern::server
