// tern-server's routes: every endpoint's handler, registered on the httplib server (routes.h).
#include "tools/server/routes.h"

#include <httplib.h>
#include <poll.h>
#include <sys/socket.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "include/tern.h"
#include "tools/server/generation.h"
#include "tools/server/process_memory.h"
#include "tools/server/reply_stream.h"
#include "tools/server/request_scanner.h"
#include "tools/server/server_api.h"
#include "tools/server/structured_output.h"

namespace tern::server {

namespace {

using nlohmann::json;

// The socket of the request this worker thread runs (set by the gate's serve hook).
thread_local int t_client_fd = -1;

// Whether the client on socket `fd` has closed its side or reset: bytes it may still have sent
// (a pipelined request) are left unread. A half-close counts as leaving, as in nginx.
bool socket_gone(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if ((p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) return true;
  char byte;
  return ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

// Whether the client of this thread's request has left.
bool client_gone() { return socket_gone(t_client_fd); }

// For a request that is not streamed: whether its client has left, asked at most every 50 ms
// as the reply's events arrive.
class StopWhenClientGone final : public GenerationEvents {
 public:
  bool gone = false;
  bool content(const std::string&) override { return check(); }
  bool call(const std::string&) override { return check(); }
  bool arguments(const std::string&) override { return check(); }
  bool token(const TokenLogprob&) override { return check(); }

 private:
  bool check() {
    const double now = now_s();
    if (now < next_) return true;
    next_ = now + 0.05;
    gone = client_gone();
    return !gone;
  }
  double next_ = now_s() + 0.05;
};

// JSON text; bytes that are not UTF-8 (say a detokenized byte token) become U+FFFD rather
// than an exception.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void reply_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(error_body(e)), "application/json");
}

void log_line(ServerState& s, const httplib::Request& req, int status, uint32_t prompt, uint32_t completion,
              double seconds, double decode_seconds) {
  std::lock_guard<std::mutex> lock(s.log_mutex);
  // The path is percent-decoded: %00 or %1b reach here as bytes.
  std::fprintf(stderr, "%s %s %d prompt=%u completion=%u tok/s=%.1f %.3fs\n",
               req.method.empty() ? "-" : escape_for_log(req.method).c_str(),
               req.path.empty() ? "-" : escape_for_log(req.path).c_str(), status, prompt, completion,
               decode_seconds > 0 ? completion / decode_seconds : 0.0, seconds);
}

bool ensure_ready(ServerState& s, httplib::Response& res) {
  if (s.ready) return true;
  ApiError e;
  e.status = 503;
  e.type = "server_error";
  e.message = s.failed ? "the model failed to load: " + s.load_error : "the model is loading";
  reply_error(res, e);
  res.set_header("Retry-After", "2");
  return false;
}

// What /v1/embeddings checks requests against: the name, dimensions, vocabulary and the
// prompts stored in the bundle.
EmbeddingModel embedding_model(const ServerState& s) {
  EmbeddingModel m{s.model_name, s.embedding.dimensions, s.info.vocab_size, {}};
  for (size_t i = 0; i < s.embedding.n_prompts; ++i) {
    const char* name = nullptr;
    const char* text = nullptr;
    if (tern_model_embedding_prompt(s.model, i, &name, &text) == TERN_OK) m.prompts.push_back(name);
  }
  return m;
}

// POST /v1/embeddings: every input through tern_embed (texts) or tern_embed_tokens (token
// ids) in one call on one slot (the inputs share forward passes), float32 vectors as numbers
// or base64.
void handle_embeddings(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  const double start = now_s();
  if (!ensure_ready(s, res)) return;
  auto refuse = [&](const ApiError& e) {
    reply_error(res, e);
    log_line(s, req, res.status, 0, 0, now_s() - start, 0);
  };
  if (s.embedding.dimensions == 0) {
    return refuse(ApiError{400, "'" + s.model_name + "' generates text: it has no embeddings; serve an embedding model",
                           "invalid_request_error", "model", "model_not_supported"});
  }
  if (!valid_utf8(req.body)) {
    return refuse(ApiError{400, "the request body is not valid UTF-8", "invalid_request_error", "", ""});
  }
  ApiError error;
  auto parsed = parse_embedding_request(req.body, embedding_model(s), &error);
  if (!parsed) return refuse(error);
  const EmbeddingRequest& r = *parsed;
  const uint32_t dims = r.dimensions > 0 ? r.dimensions : s.embedding.dimensions;
  std::vector<const char*> texts;
  std::vector<size_t> sizes;
  for (const std::string& t : r.input) {
    texts.push_back(t.data());
    sizes.push_back(t.size());
  }
  std::vector<const int32_t*> lists;
  std::vector<size_t> counts;
  for (const std::vector<int32_t>& ids : r.tokens) {
    lists.push_back(ids.data());
    counts.push_back(ids.size());
  }
  std::vector<float> vectors(r.count() * dims);
  SlotPool::Refusal why;
  const auto slot = s.pool->acquire(std::chrono::seconds(s.opt.timeout), &why, client_gone);
  if (!slot) {
    res.set_header("Retry-After", "1");
    // 499: the client closed the connection while its request waited (nginx's name for it).
    if (why == SlotPool::Refusal::ClientGone) return refuse(ApiError{499, "the client left", "", "", ""});
    return refuse(
        ApiError{503, "the server is busy: no session slot became free in time", "server_error", "", "server_busy"});
  }
  tern_embed_params ep = tern_embed_default_params();
  ep.dimensions = r.dimensions;
  ep.prompt_name = r.prompt_name ? r.prompt_name->c_str() : nullptr;
  tern_embed_stats stats{};
  const size_t out_bytes = vectors.size() * sizeof(float);
  const tern_status st = r.tokens.empty()
                             ? tern_embed(s.sessions[*slot], texts.data(), sizes.data(), texts.size(), &ep,
                                          vectors.data(), out_bytes, nullptr, &stats)
                             : tern_embed_tokens(s.sessions[*slot], lists.data(), counts.data(), lists.size(), &ep,
                                                 vectors.data(), out_bytes, nullptr, &stats);
  s.pool->release(*slot);
  if (st != TERN_OK) {
    ApiError e = status_error(st, "embedding");
    const bool input = st == TERN_PROMPT_TOO_LONG || st == TERN_INVALID_TOKEN;
    e.param = input ? "input" : "";
    if (st == TERN_PROMPT_TOO_LONG) e.code = "context_length_exceeded";
    return refuse(e);
  }
  res.set_content(dump(embeddings_body(s.model_name, vectors, dims, r.base64, stats.n_tokens)), "application/json");
  log_line(s, req, 200, static_cast<uint32_t>(stats.n_tokens), 0, now_s() - start, 0);
}

// Token ids as text (control tokens skipped); false when the C API refuses them.
bool detokenize(const ServerState& s, const std::vector<int32_t>& ids, std::string* out, tern_status* status) {
  std::vector<char> text(64 * ids.size() + 16);
  size_t size = 0;
  tern_status st;
  // Pieces may be longer than 64 bytes (LLaMA-3 has 128-byte ones): grow until the text fits.
  for (int grow = 0;
       (st = tern_detokenize(s.model, ids.data(), ids.size(), text.data(), text.size(), &size)) == TERN_OUT_OF_RANGE &&
       grow < 8;
       ++grow) {
    text.resize(text.size() * 2);
  }
  if (status != nullptr) *status = st;
  if (st != TERN_OK) return false;
  out->assign(text.data(), size);
  return true;
}

// A completion prompt given as token ids: each in the vocabulary (the engine runs them as
// given), and their text for "echo".
bool check_ids(const ServerState& s, const std::vector<int32_t>& ids, std::string* text, ApiError* e) {
  for (const int32_t id : ids) {
    if (id < 0 || static_cast<uint32_t>(id) >= s.info.vocab_size) {
      *e = ApiError{400,
                    "token id " + std::to_string(id) + " is outside the vocabulary (0 to " +
                        std::to_string(s.info.vocab_size - 1) + ")",
                    "invalid_request_error", "prompt", ""};
      return false;
    }
  }
  tern_status st = TERN_OK;
  if (detokenize(s, ids, text, &st)) return true;
  *e = status_error(st, "prompt");
  return false;
}

// What a request runs: a chat once; a completion once per prompt (its choice i), each as the
// request prepare() sees, with the text "echo" puts in front of its choice. A run's prepared
// call points into its request: runs stay where they are made (a deque).
struct Run {
  GenerationRequest request;
  Prepared prepared;
  std::string echo;
};
using Runs = std::deque<Run>;

// Every run made ready before a slot is taken, so any prompt's 4xx is answered first.
bool prepare_runs(ServerState& s, const GenerationRequest& r, Runs* runs, ApiError* e) {
  const size_t n = r.chat ? 1 : r.prompts.size();
  for (size_t i = 0; i < n; ++i) {
    Run& run = runs->emplace_back();
    run.request = r;
    if (!r.chat) {
      run.request.prompts.clear();
      run.request.prompt = r.prompts[i].text;
      run.request.prompt_ids = r.prompts[i].ids;
      if (!r.prompts[i].ids.empty() && !check_ids(s, r.prompts[i].ids, &run.request.prompt, e)) {
        if (n > 1) e->message = "prompt " + std::to_string(i) + ": " + e->message;
        return false;
      }
      if (r.echo) run.echo = run.request.prompt;  // the prompt as given; token ids as their text
    }
    run.prepared = prepare(s, run.request);
    if (!run.prepared.ok) {
      *e = run.prepared.error;
      if (n > 1) e->message = "prompt " + std::to_string(i) + ": " + e->message;
      return false;
    }
  }
  return true;
}

// A request's runs added up (usage, the log line), and the first that failed.
struct Totals {
  Usage usage;
  double decode_seconds = 0;
  bool ok = true;
  ApiError error;
  void add(const Generation& g) {
    usage.prompt_tokens += g.prompt_tokens;
    usage.completion_tokens += g.completion_tokens;
    usage.cached_tokens += g.reused_tokens;
    decode_seconds += g.decode_seconds;
    if (!g.ok && ok) ok = false, error = g.error;
  }
};

// A streamed reply: the slot is held until the provider has run, and freed as soon as the
// client is found gone (a failed write stops the generation) or if the provider never runs.
// A completion's prompts stream one after the other, each chunk with its choice's index.
void stream_reply(ServerState& s, const httplib::Request& req, httplib::Response& res,
                  std::shared_ptr<GenerationRequest> request, std::shared_ptr<Runs> runs, size_t slot_index,
                  double start) {
  const bool chat = request->chat;
  const std::string id = new_id(chat);
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  auto released = std::make_shared<std::atomic<bool>>(false);
  auto release = [&s, slot_index, released] {
    if (!released->exchange(true)) s.pool->release(slot_index);
  };
  const std::string method = req.method, path = req.path;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // no buffering by a reverse proxy in front
  res.set_chunked_content_provider(
      "text/event-stream",
      [&s, request, runs, id, created, chat, slot_index, release, start, method, path](size_t,
                                                                                       httplib::DataSink& sink) {
        bool gone = false;
        auto write = [&](const std::string& event) {
          if (gone || !sink.is_writable() || !sink.write(event.data(), event.size())) gone = true;
          return !gone;
        };
        Totals t;
        for (size_t i = 0; i < runs->size() && t.ok && !gone; ++i) {
          const Run& run = (*runs)[i];
          if (!run.echo.empty() &&
              !write(stream_chunk(false, id, created, s.model_name, run.echo, nullptr, false, nullptr, i))) {
            break;
          }
          ReplyStream reply(run.request, id, created, s.model_name, write, i);
          const Generation g = generate(s, s.sessions[slot_index], run.prepared, &reply);
          t.add(g);
          if (g.ok && !gone) reply.finish(g.finish_reason);
        }
        release();
        if (!t.ok) {
          write("data: " + dump(error_body(t.error)) + "\n\n");
        } else if (!gone) {
          if (request->include_usage) write(stream_usage_chunk(chat, id, created, s.model_name, t.usage));
          write(stream_done());
        }
        if (!gone) sink.done();
        httplib::Request logged;
        logged.method = method;
        logged.path = path;
        // 499: the client closed the stream before its end (nginx's name for it).
        log_line(s, logged,
                 gone   ? 499
                 : t.ok ? 200
                        : t.error.status,
                 t.usage.prompt_tokens, t.usage.completion_tokens, now_s() - start, t.decode_seconds);
        return !gone;
      },
      [release](bool) { release(); });
}

// One generation request, streamed or not.
void handle_generation(ServerState& s, const httplib::Request& req, httplib::Response& res, bool chat) {
  const double start = now_s();
  if (!ensure_ready(s, res)) return;
  auto refuse = [&](const ApiError& e) {
    reply_error(res, e);
    log_line(s, req, res.status, 0, 0, now_s() - start, 0);
  };
  if (!valid_utf8(req.body)) {
    return refuse(ApiError{400, "the request body is not valid UTF-8", "invalid_request_error", "", ""});
  }
  if (s.embedding.dimensions > 0) {
    return refuse(
        ApiError{400, "'" + s.model_name + "' is an embedding model: it does not generate text; use /v1/embeddings",
                 "invalid_request_error", "model", "model_not_supported"});
  }
  ApiError error;
  auto parsed = parse_generation_request(req.body, chat, s.model_name, &error);
  if (!parsed) return refuse(error);
  auto request = std::make_shared<GenerationRequest>(std::move(*parsed));
  auto runs = std::make_shared<Runs>();
  if (!prepare_runs(s, *request, runs.get(), &error)) return refuse(error);
  const Prepared& prepared = runs->front().prepared;  // the grammar: the same for every run
  SlotPool::Refusal why;
  // Among free slots: the one holding the grammar, then the most of the prompt (slots are idle
  // while the pool asks, so reading their history is safe).
  const auto slot = s.pool->acquire(std::chrono::seconds(s.opt.timeout), &why, client_gone,
                                    std::chrono::milliseconds(50), grammar_key(prepared.grammar),
                                    [&s, &prepared](size_t i) { return shared_prefix(s.sessions[i], prepared.ids); });
  if (!slot) {
    res.set_header("Retry-After", "1");
    if (why == SlotPool::Refusal::ClientGone) return refuse(ApiError{499, "the client left", "", "", ""});
    return refuse(ApiError{503,
                           why == SlotPool::Refusal::QueueFull
                               ? "the server is busy: every session slot is taken and the queue is full"
                               : "the server is busy: no session slot became free in time",
                           "server_error", "", "server_busy"});
  }
  const size_t slot_index = *slot;
  // The grammar before any reply byte: a compile that fails or times out is an HTTP 400, also
  // for a stream. The watchdog thread asks this request's socket whether its client has left.
  const SlotGrammar grammar =
      set_slot_grammar(s, slot_index, *request, prepared, [fd = t_client_fd] { return socket_gone(fd); });
  if (!grammar.ok) {
    s.pool->release(slot_index);
    return refuse(grammar.error);
  }
  if (!prepared.grammar.empty()) {
    char note[64];
    std::snprintf(note, sizeof note, "compiled %.0f ms", grammar.compile_ms);
    res.set_header("X-Tern-Grammar", grammar.reused ? "reused" : note);
  }
  if (request->stream) return stream_reply(s, req, res, request, runs, slot_index, start);
  // A client that has left stops the generation (its slot is free for the next at once).
  StopWhenClientGone watch;
  Generation g;
  Totals t;
  std::vector<TextChoice> choices;
  for (size_t i = 0; i < runs->size() && t.ok && !watch.gone; ++i) {
    const Run& run = (*runs)[i];
    g = generate(s, s.sessions[slot_index], run.prepared, &watch);
    t.add(g);
    choices.push_back({run.echo + g.text, g.finish_reason,
                       run.request.logprobs ? logprobs_body(false, g.logprobs) : nlohmann::json(nullptr)});
  }
  s.pool->release(slot_index);
  const std::string id = new_id(chat);
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  if (watch.gone) {
    reply_error(res, ApiError{499, "the client left", "", "", ""});
  } else if (!t.ok) {
    reply_error(res, t.error);
  } else if (chat) {
    res.set_content(dump(reply_body(chat, id, created, s.model_name, runs->front().request, g)), "application/json");
  } else {
    res.set_content(dump(text_completion_body(id, created, s.model_name, choices, t.usage)), "application/json");
  }
  log_line(s, req,
           watch.gone ? 499
           : t.ok     ? 200
                      : t.error.status,
           t.usage.prompt_tokens, t.usage.completion_tokens, now_s() - start, t.decode_seconds);
}

// A CORS preflight (OPTIONS with Origin and Access-Control-Request-Method): 204, and for an
// allowed origin what it may send: GET and POST, the headers it asks for (the openai client
// adds its own x-stainless-* ones) or at least Authorization and Content-Type, for a day.
void answer_preflight(const httplib::Request& req, httplib::Response& res, bool allowed) {
  res.status = 204;
  res.set_header("Allow", "GET, POST, OPTIONS");
  if (!allowed) return;
  res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
  const std::string headers = req.get_header_value("Access-Control-Request-Headers");
  const bool plain = !headers.empty() && headers.size() <= 1024 &&
                     headers.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_, ") ==
                         std::string::npos;
  res.set_header("Access-Control-Allow-Headers", plain ? headers : "Authorization, Content-Type");
  res.set_header("Access-Control-Max-Age", "86400");
}

// CORS (--cors-origin: preflights answered, every reply to an allowed origin marked readable),
// the API key (on every endpoint but /health; a preflight needs none, as browsers send it
// without credentials), and error replies in the API's shape for what no handler answered
// (404, 413, ...).
void add_access_handlers(GatedServer& http, ServerState& s) {
  http.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
    if (!s.opt.cors_origins.empty()) {
      const std::string allowed = cors_allowed_origin(s.opt, req.get_header_value("Origin"));
      if (!allowed.empty()) {
        res.set_header("Access-Control-Allow-Origin", allowed);
        res.set_header("Access-Control-Expose-Headers", "Retry-After, X-Tern-Grammar");
      }
      if (allowed != "*") res.set_header("Vary", "Origin");
      if (req.method == "OPTIONS") {
        answer_preflight(req, res, !allowed.empty());
        log_line(s, req, res.status, 0, 0, 0, 0);
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (s.opt.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    if (equals_secret(req.get_header_value("Authorization"), "Bearer " + s.opt.api_key)) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    reply_error(res, ApiError{401, "Incorrect API key provided", "invalid_request_error", "", "invalid_api_key"});
    log_line(s, req, 401, 0, 0, 0, 0);
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_error_handler([&s](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    ApiError e;
    e.status = res.status;
    e.message = res.status == 413   ? "the request body is larger than " + std::to_string(s.opt.max_body) + " bytes"
                : res.status == 404 ? "no such endpoint: " + req.method + " " + req.path
                                    : "HTTP " + std::to_string(res.status);
    reply_error(res, e);
    log_line(s, req, res.status, 0, 0, 0, 0);
  });
}

// /health (answered while loading too), /props and /v1/models.
void add_status_routes(GatedServer& http, ServerState& s, const ConnectionGate& gate) {
  http.Get("/health", [&s, &gate](const httplib::Request&, httplib::Response& res) {
    json j;
    if (!s.ready) {
      j["status"] = s.failed ? "error" : "loading";
      if (s.failed) j["error"] = s.load_error;
      res.status = 503;
    } else {
      const size_t idle = s.pool->idle();
      j["status"] = idle > 0 ? "ok" : "busy";
      tern_memory_report r{};
      tern_memory_report_get(s.model, &r);
      j["slots_idle"] = idle;
      j["slots_total"] = s.pool->total();
      j["queue"] = s.pool->waiting();
      const ConnectionGate::Counts c = gate.counts();
      j["connections"] = {{"open", c.open},
                          {"running", c.running},
                          {"closing", c.lingering},
                          {"buffered_bytes", c.buffered_bytes},
                          {"limit", s.opt.max_connections},
                          {"per_client_limit", gate_limits(s.opt).max_connections_per_client}};
      j["memory"] = {{"budget_bytes", r.budget_bytes},
                     {"planned_bytes", r.planned_total_bytes},
                     {"arena_used_bytes", r.arena_used_bytes},
                     {"kv_mode", r.kv_mode},
                     {"context_tokens", r.context_tokens},
                     {"rss_bytes", resident_bytes()},
                     {"allowance_bytes", memory_allowance(s.opt)}};
      const SchemaGrammarCache::Stats cache = schema_grammar_cache().stats();
      j["grammar"] = {{"compiled", s.grammar.compiled.load()},
                      {"reused", s.grammar.reused.load()},
                      {"timed_out", s.grammar.timed_out.load()},
                      {"too_large", s.grammar.too_large.load()},
                      {"compile_ms", s.grammar.compile_us.load() / 1000},
                      {"compile_limit_ms", s.opt.grammar_compile_ms},
                      {"schema_cache", {{"entries", cache.entries}, {"hits", cache.hits}, {"misses", cache.misses}}}};
    }
    res.set_content(dump(j), "application/json");
  });
  // What a client needs to know about the model (llama.cpp's server has the same endpoint).
  http.Get("/props", [&s](const httplib::Request&, httplib::Response& res) {
    if (!ensure_ready(s, res)) return;
    const tern_model_info& i = s.info;
    json j = {{"model", s.model_name},
              {"n_ctx", i.context_tokens},
              {"max_context", i.max_context},
              {"total_slots", s.pool->total()},
              {"vocab_size", i.vocab_size},
              {"bos_id", i.bos_id},
              {"eos_id", i.eos_id},
              {"eot_id", i.eot_id},
              {"chat_format", i.chat_format},
              {"chat_stop", i.chat_stop ? json(i.chat_stop) : json(nullptr)},
              {"chat_template", i.chat_template ? json(i.chat_template) : json(nullptr)},
              {"evicting", s.evicting}};
    res.set_content(dump(j), "application/json");
  });
  http.Get("/v1/models", [&s](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump(models_body(s.model_name, s.created)), "application/json");
  });
  // The model's object under its served name (ids may hold '/': "org/model").
  http.Get(R"(/v1/models/(.+))", [&s](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (id != s.model_name) {
      return reply_error(res,
                         ApiError{404, "The model '" + id + "' does not exist; this server has '" + s.model_name + "'",
                                  "invalid_request_error", "model", "model_not_found"});
    }
    res.set_content(dump(model_object(s.model_name, s.created)), "application/json");
  });
}

void add_generation_routes(GatedServer& http, ServerState& s) {
  http.Post("/v1/chat/completions",
            [&s](const httplib::Request& req, httplib::Response& res) { handle_generation(s, req, res, true); });
  http.Post("/v1/completions",
            [&s](const httplib::Request& req, httplib::Response& res) { handle_generation(s, req, res, false); });
  http.Post("/v1/embeddings",
            [&s](const httplib::Request& req, httplib::Response& res) { handle_embeddings(s, req, res); });
}

// /tokenize and /detokenize (llama.cpp's server has the same endpoints).
void add_token_routes(GatedServer& http, ServerState& s) {
  http.Post("/tokenize", [&s](const httplib::Request& req, httplib::Response& res) {
    if (!ensure_ready(s, res)) return;
    const json j = json::parse(req.body, nullptr, false);
    if (!valid_utf8(req.body) || j.is_discarded() || !j.is_object() || !j.contains("content") ||
        !j["content"].is_string()) {
      return reply_error(res, ApiError{400, "expected {\"content\": string, \"add_special\": bool}",
                                       "invalid_request_error", "content", ""});
    }
    const std::string text = j["content"].get<std::string>();
    const bool add_special = j.value("add_special", false);
    std::vector<int32_t> ids(text.size() + 2);
    size_t n = 0;
    const tern_status st = tern_tokenize(s.model, text.data(), text.size(), add_special, 1, ids.data(), ids.size(), &n);
    if (st != TERN_OK) return reply_error(res, status_error(st, "tokenize"));
    ids.resize(n);
    res.set_content(dump(json{{"tokens", ids}}), "application/json");
  });
  http.Post("/detokenize", [&s](const httplib::Request& req, httplib::Response& res) {
    if (!ensure_ready(s, res)) return;
    const json j = json::parse(req.body, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("tokens") || !j["tokens"].is_array()) {
      return reply_error(res, ApiError{400, "expected {\"tokens\": [ids]}", "invalid_request_error", "tokens", ""});
    }
    std::vector<int32_t> ids;
    for (const json& t : j["tokens"]) {
      if (!t.is_number_integer()) {
        return reply_error(res, ApiError{400, "token ids must be integers", "invalid_request_error", "tokens", ""});
      }
      ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    std::string text;
    tern_status st = TERN_OK;
    if (!detokenize(s, ids, &text, &st)) return reply_error(res, status_error(st, "detokenize"));
    res.set_content(dump(json{{"content", text}}), "application/json");
  });
}

}  // namespace

void add_routes(GatedServer& http, ServerState& s, const ConnectionGate& gate) {
  set_system_fingerprint(bundle_fingerprint(s.opt.bundle, tern_version()));
  add_access_handlers(http, s);
  add_status_routes(http, s, gate);
  add_generation_routes(http, s);
  add_token_routes(http, s);
}

GateHooks gate_hooks(GatedServer& http, ServerState& s) {
  GateHooks hooks;
  hooks.serve = [&http](httplib::Stream& stream, bool close_connection, bool& connection_closed) {
    t_client_fd = stream.socket();
    const bool keep = http.serve(stream, close_connection, connection_closed);
    t_client_fd = -1;
    release_request_memory();
    return keep;
  };
  hooks.error_body = [](int status, const std::string& message) {
    ApiError e{status, message, status == 503 ? "server_error" : "invalid_request_error", "", ""};
    if (status == 503) e.code = "server_busy";
    return dump(error_body(e));
  };
  hooks.log = [&s](const std::string& method, const std::string& path, int status, const std::string& message) {
    std::lock_guard<std::mutex> lock(s.log_mutex);
    std::fprintf(stderr, "%s %s %d (%s)\n", method.empty() ? "-" : escape_for_log(method).c_str(),
                 path.empty() ? "-" : escape_for_log(path).c_str(), status, escape_for_log(message).c_str());
  };
  return hooks;
}

}  // namespace tern::server
