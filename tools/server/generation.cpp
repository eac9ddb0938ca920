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

struct PieceSink {
  std::function<bool(const std::string&)> on_piece;  // false: the client is gone
  Generation* g;
  double start;
  static int call(const char* text, size_t size, void* user) {
    auto* self = static_cast<PieceSink*>(user);
    self->g->text.append(text, size);
    if (self->g->first_piece_s < 0) self->g->first_piece_s = now_s() - self->start;
    if (self->on_piece && !self->on_piece(std::string(text, size))) return 1;
    return 0;
  }
};

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

Prepared prepare(ServerState& s, const GenerationRequest& r) {
  Prepared p;
  // The prompt: the chat rendered in the model's format (it carries the BOS text), or the
  // completion prompt with a BOS in front, as tern-run does.
  std::string text;
  bool add_bos = true;
  if (!reply_grammar(r.structured, &p.grammar, &p.error)) return p;
  if (r.chat) {
    const std::vector<Message> shown = prompt_messages(r);  // the tools, when offered, in a system message
    std::vector<tern_chat_message> messages;
    for (const Message& m : shown) messages.push_back({m.role.c_str(), m.content.c_str()});
    size_t size = 0;
    tern_status st = tern_chat_apply(s.model, messages.data(), messages.size(), 1, nullptr, 0, &size);
    std::vector<char> buf(size + 1);
    if (st == TERN_OK || st == TERN_OUT_OF_RANGE) {
      st = tern_chat_apply(s.model, messages.data(), messages.size(), 1, buf.data(), buf.size(), &size);
    }
    if (st != TERN_OK) {
      p.error = status_error(st, "chat template");
      p.error.param = "messages";
      return p;
    }
    text.assign(buf.data(), size);
    add_bos = false;
  } else {
    text = r.prompt;
  }
  p.ids.resize(text.size() + 2);
  size_t n = 0;
  const tern_status st =
      tern_tokenize(s.model, text.data(), text.size(), add_bos ? 1 : 0, 1, p.ids.data(), p.ids.size(), &n);
  if (st != TERN_OK) {
    p.error = status_error(st, "tokenize");
    return p;
  }
  p.ids.resize(n);
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
  p.max_tokens = r.max_tokens;
  if (p.max_tokens < 0) p.max_tokens = s.evicting ? 4096 : static_cast<int64_t>(ctx - n);
  if (!s.evicting && p.max_tokens > static_cast<int64_t>(ctx - n)) {
    p.error = ApiError{400,
                       "max_tokens " + std::to_string(p.max_tokens) + " is beyond the context: the prompt takes " +
                           std::to_string(n) + " of its " + std::to_string(ctx) + " tokens",
                       "invalid_request_error", "max_tokens", "context_length_exceeded"};
    return p;
  }
  p.ok = true;
  return p;
}

Generation generate(ServerState& s, tern_session* session, const GenerationRequest& r, const Prepared& p,
                    std::function<bool(const std::string&)> on_piece) {
  Generation g;
  const double start = now_s();
  const std::vector<int32_t>& ids = p.ids;
  const size_t n = ids.size();
  g.prompt_tokens = static_cast<uint32_t>(n);
  // Reuse what the slot already holds: keep the common prefix, run the rest (at least the
  // last prompt token, for fresh logits).
  uint32_t position = 0;
  tern_session_position(session, &position);
  std::vector<int32_t> held(static_cast<size_t>(position) + 1);
  size_t held_n = 0;
  size_t keep = 0;
  if (position > 0 && tern_session_history(session, held.data(), held.size(), &held_n) == TERN_OK &&
      held_n == position) {
    while (keep < held_n && keep < n && held[keep] == ids[keep]) ++keep;
  }
  if (keep == n) --keep;
  if (position > 0 && (keep == 0 || tern_session_truncate(session, static_cast<uint32_t>(keep)) != TERN_OK)) {
    tern_session_reset(session);
    keep = 0;
  }
  g.reused_tokens = static_cast<uint32_t>(keep);
  tern_session_clear_abort(session);
  tern_sampler_params sp = tern_sampler_default_params();
  sp.temperature = r.temperature;
  sp.top_p = r.top_p;
  sp.presence_penalty = r.presence_penalty;
  sp.frequency_penalty = r.frequency_penalty;
  sp.seed = r.seed ? *r.seed : std::random_device{}();
  tern_status st = tern_session_set_sampler(session, &sp);
  if (st != TERN_OK) {
    g.error = status_error(st, "sampler");
    return g;
  }
  std::vector<tern_logit_bias> bias;
  for (const auto& [token, value] : r.logit_bias) bias.push_back({token, value <= -100.0f ? -INFINITY : value});
  if ((st = tern_session_set_logit_bias(session, bias.data(), bias.size())) != TERN_OK) {
    g.error = status_error(st, "logit_bias");
    g.error.param = "logit_bias";
    return g;
  }
  if ((st = tern_prefill(session, ids.data() + keep, n - keep)) != TERN_OK) {
    g.error = status_error(st, "prompt");
    tern_session_set_logit_bias(session, nullptr, 0);
    tern_session_reset(session);
    return g;
  }
  std::vector<const char*> stops;
  for (const std::string& x : r.stop) stops.push_back(x.c_str());
  if (r.chat && s.info.chat_stop != nullptr && s.info.chat_stop[0] != '\0') stops.push_back(s.info.chat_stop);
  tern_generate_params gp = tern_generate_default_params();
  gp.max_new_tokens = static_cast<uint32_t>(std::min<int64_t>(p.max_tokens, UINT32_MAX));
  gp.add_bos = 0;
  gp.stop_strings = stops.empty() ? nullptr : stops.data();
  gp.n_stop_strings = stops.size();
  PieceSink sink{std::move(on_piece), &g, start};
  tern_generate_stats stats{};
  st = tern_generate(session, "", 0, &gp, &PieceSink::call, &sink, &stats);
  tern_session_set_logit_bias(session, nullptr, 0);
  if (st != TERN_OK) {
    g.error = status_error(st, "generate");
    tern_session_reset(session);
    return g;
  }
  g.completion_tokens = stats.generated_tokens;
  g.decode_seconds = stats.decode_seconds;
  g.finish_reason =
      stats.stop_reason == TERN_STOP_MAX_TOKENS || stats.stop_reason == TERN_STOP_CONTEXT_FULL ? "length" : "stop";
  g.ok = true;
  return g;
}

}  // namespace tern::server
