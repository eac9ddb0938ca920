// Running one generation request on a session slot through the C API: the prompt made ready
// (rendered, tokenized and checked against the context), then generated, piece by piece.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "include/tern.h"
#include "tools/server/server_api.h"
#include "tools/server/server_state.h"

namespace tern::server {

// Seconds on the steady clock.
double now_s();

// A failed C API call as the API error it is: 400 for what the request got wrong, else 500.
ApiError status_error(tern_status st, const char* what);

// A request made ready to run: its prompt tokens and how many it may add. Done before a
// slot is taken, so a bad request is answered with its 4xx (also when streaming) at once.
struct Prepared {
  std::vector<int32_t> ids;
  int64_t max_tokens = 0;
  std::string grammar;  // what the reply must follow (response_format, tools); empty: nothing
  bool ok = false;
  ApiError error;
};

struct Generation {
  std::string text;
  uint32_t prompt_tokens = 0, completion_tokens = 0;
  std::string finish_reason = "stop";
  uint32_t reused_tokens = 0;
  double first_piece_s = -1, decode_seconds = 0;
  ApiError error;
  bool ok = false;
};

Prepared prepare(ServerState& s, const GenerationRequest& r);

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

// Runs a prepared request on one slot's session (its grammar set), streaming pieces through
// on_piece.
Generation generate(ServerState& s, tern_session* session, const GenerationRequest& r, const Prepared& p,
                    std::function<bool(const std::string&)> on_piece);

}  // namespace tern::server
