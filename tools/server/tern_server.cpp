// tern-server MODEL.tern [--host 127.0.0.1] [--port 8080] [--memory-budget 1G|available[-P%]]
//             [--kv MODE] [--ctx N] [--sessions N] [--threads N] [--api-key KEY] [--timeout S]
// An OpenAI-compatible HTTP server over the C API: /v1/chat/completions, /v1/completions
// (both with streaming), /v1/embeddings (embedding bundles), /v1/models, /health, /tokenize,
// /detokenize. Each of --sessions
// slots is a session of the one loaded model; requests beyond the free slots wait in a
// bounded queue, and past it get 503 with Retry-After. A request whose prompt starts with
// what its slot already holds skips re-running that prefix.
#include <CLI/CLI.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <ctime>
#include <functional>
#include <pthread.h>
#include <signal.h>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "include/tern.h"
#include "tools/server/server_api.h"
#include "tools/server/slot_pool.h"

using nlohmann::json;
using namespace tern::server;

namespace {

struct Options {
  std::string bundle, host = "127.0.0.1", budget = "0", kv = "f32", api_key;
  int port = 8080;
  unsigned ctx = 0, sessions = 1, threads = 1, timeout = 600, queue = 16;
  size_t max_body = 1 << 20;
};

struct Server {
  Options opt;
  std::string model_name;
  int64_t created = 0;
  tern_model* model = nullptr;
  std::vector<tern_session*> sessions;
  std::unique_ptr<SlotPool> pool;
  tern_model_info info{};
  tern_embedding_info embedding{};  // dimensions > 0: an embedding model
  bool evicting = false;
  std::atomic<bool> ready{false};
  std::atomic<bool> failed{false};
  std::string load_error;
  std::mutex log_mutex;
};


double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// JSON text; bytes that are not UTF-8 (say a detokenized byte token) become U+FFFD rather
// than an exception.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void reply_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(error_body(e)), "application/json");
}

void log_line(Server& s, const httplib::Request& req, int status, uint32_t prompt, uint32_t completion,
              double seconds, double decode_seconds) {
  std::lock_guard<std::mutex> lock(s.log_mutex);
  std::fprintf(stderr, "%s %s %d prompt=%u completion=%u tok/s=%.1f %.3fs\n", req.method.c_str(), req.path.c_str(),
               status, prompt, completion, decode_seconds > 0 ? completion / decode_seconds : 0.0, seconds);
}

bool ensure_ready(Server& s, httplib::Response& res) {
  if (s.ready) return true;
  ApiError e;
  e.status = 503;
  e.type = "server_error";
  e.message = s.failed ? "the model failed to load: " + s.load_error : "the model is loading";
  reply_error(res, e);
  res.set_header("Retry-After", "2");
  return false;
}

struct Generation {
  std::string text;
  uint32_t prompt_tokens = 0, completion_tokens = 0;
  std::string finish_reason = "stop";
  uint32_t reused_tokens = 0;
  double first_piece_s = -1, decode_seconds = 0;
  ApiError error;
  bool ok = false;
};

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

ApiError status_error(tern_status st, const char* what) {
  ApiError e;
  e.status = st == TERN_INVALID_TOKEN || st == TERN_INVALID_UTF8 || st == TERN_INVALID_ARGUMENT ||
                     st == TERN_PROMPT_TOO_LONG
                 ? 400
                 : 500;
  if (e.status == 500) e.type = "server_error";
  e.message = std::string(what) + ": " + tern_last_error_message() + " (" + tern_status_string(st) + ")";
  return e;
}

// A request made ready to run: its prompt tokens and how many it may add. Done before a
// slot is taken, so a bad request is answered with its 4xx (also when streaming) at once.
struct Prepared {
  std::vector<int32_t> ids;
  int64_t max_tokens = 0;
  bool ok = false;
  ApiError error;
};

Prepared prepare(Server& s, const GenerationRequest& r) {
  Prepared p;
  // The prompt: the chat rendered in the model's format (it carries the BOS text), or the
  // completion prompt with a BOS in front, as tern-run does.
  std::string text;
  bool add_bos = true;
  if (r.chat) {
    std::vector<tern_chat_message> messages;
    for (const Message& m : r.messages) messages.push_back({m.role.c_str(), m.content.c_str()});
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

// Runs a prepared request on one slot's session, streaming pieces through on_piece.
Generation generate(Server& s, tern_session* session, const GenerationRequest& r, const Prepared& p,
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

std::atomic<bool> g_listen_returned{false};

// stop() before listen has started is lost: wait for it to run first.
void stop_server(httplib::Server& http) {
  while (!http.is_running() && !g_listen_returned) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  http.stop();
}

std::string new_id(bool chat) {
  static std::atomic<uint64_t> counter{0};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%llx%04llx", chat ? "chatcmpl" : "cmpl",
                static_cast<unsigned long long>(std::time(nullptr)), static_cast<unsigned long long>(counter++ & 0xffff));
  return buf;
}

// POST /v1/embeddings: every input through tern_embed in one call on one slot (the texts
// share forward passes), float32 vectors as numbers or base64.
void handle_embeddings(Server& s, const httplib::Request& req, httplib::Response& res) {
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
  auto parsed = parse_embedding_request(req.body, s.model_name, s.embedding.dimensions, &error);
  if (!parsed) return refuse(error);
  const EmbeddingRequest& r = *parsed;
  const uint32_t dims = r.dimensions > 0 ? r.dimensions : s.embedding.dimensions;
  std::vector<const char*> texts;
  std::vector<size_t> sizes;
  for (const std::string& t : r.input) {
    texts.push_back(t.data());
    sizes.push_back(t.size());
  }
  std::vector<float> vectors(r.input.size() * dims);
  SlotPool::Refusal why;
  const auto slot = s.pool->acquire(std::chrono::seconds(s.opt.timeout), &why);
  if (!slot) {
    res.set_header("Retry-After", "1");
    return refuse(ApiError{503, "the server is busy: no session slot became free in time", "server_error", "",
                           "server_busy"});
  }
  tern_embed_params ep = tern_embed_default_params();
  ep.dimensions = r.dimensions;
  tern_embed_stats stats{};
  const tern_status st = tern_embed(s.sessions[*slot], texts.data(), sizes.data(), texts.size(), &ep, vectors.data(),
                                    vectors.size() * sizeof(float), nullptr, &stats);
  s.pool->release(*slot);
  if (st != TERN_OK) {
    ApiError e = status_error(st, "embedding");
    e.param = st == TERN_PROMPT_TOO_LONG ? "input" : "";
    if (st == TERN_PROMPT_TOO_LONG) e.code = "context_length_exceeded";
    return refuse(e);
  }
  res.set_content(dump(embeddings_body(s.model_name, vectors, dims, r.base64, stats.n_tokens)), "application/json");
  log_line(s, req, 200, static_cast<uint32_t>(stats.n_tokens), 0, now_s() - start, 0);
}

// One generation request, streamed or not.
void handle_generation(Server& s, const httplib::Request& req, httplib::Response& res, bool chat) {
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
    return refuse(ApiError{400, "'" + s.model_name + "' is an embedding model: it does not generate text; use /v1/embeddings",
                           "invalid_request_error", "model", "model_not_supported"});
  }
  ApiError error;
  auto parsed = parse_generation_request(req.body, chat, s.model_name, &error);
  if (!parsed) return refuse(error);
  auto request = std::make_shared<GenerationRequest>(std::move(*parsed));
  auto prepared = std::make_shared<Prepared>(prepare(s, *request));
  if (!prepared->ok) return refuse(prepared->error);
  SlotPool::Refusal why;
  const auto slot = s.pool->acquire(std::chrono::seconds(s.opt.timeout), &why);
  if (!slot) {
    res.set_header("Retry-After", "1");
    return refuse(ApiError{503,
                           why == SlotPool::Refusal::QueueFull
                               ? "the server is busy: every session slot is taken and the queue is full"
                               : "the server is busy: no session slot became free in time",
                           "server_error", "", "server_busy"});
  }
  const std::string id = new_id(chat);
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  const size_t slot_index = *slot;
  if (!request->stream) {
    Generation g = generate(s, s.sessions[slot_index], *request, *prepared, nullptr);
    s.pool->release(slot_index);
    if (!g.ok) {
      reply_error(res, g.error);
    } else {
      res.set_content(dump(completion_body(chat, id, created, s.model_name, g.text, g.finish_reason,
                                           Usage{g.prompt_tokens, g.completion_tokens, g.reused_tokens})),
                      "application/json");
    }
    log_line(s, req, g.ok ? 200 : g.error.status, g.prompt_tokens, g.completion_tokens, now_s() - start,
             g.decode_seconds);
    return;
  }
  // Streamed: the slot is held until the provider has run, and freed as soon as the client
  // is found gone (a failed write stops the generation) or if the provider never runs.
  auto released = std::make_shared<std::atomic<bool>>(false);
  auto release = [&s, slot_index, released] {
    if (!released->exchange(true)) s.pool->release(slot_index);
  };
  const std::string method = req.method, path = req.path;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // no buffering by a reverse proxy in front
  res.set_chunked_content_provider(
      "text/event-stream",
      [&s, request, prepared, id, created, chat, slot_index, release, start, method, path](size_t,
                                                                                          httplib::DataSink& sink) {
        bool first = true, gone = false;
        auto write = [&](const std::string& event) {
          if (gone || !sink.is_writable() || !sink.write(event.data(), event.size())) gone = true;
          return !gone;
        };
        Generation g = generate(s, s.sessions[slot_index], *request, *prepared, [&](const std::string& piece) {
          const bool ok = write(stream_chunk(chat, id, created, s.model_name, piece, nullptr, first));
          first = false;
          return ok;
        });
        release();
        int status = 200;
        if (!g.ok) {
          status = g.error.status;
          write("data: " + dump(error_body(g.error)) + "\n\n");
        } else if (!gone) {
          write(stream_chunk(chat, id, created, s.model_name, "", &g.finish_reason, first));
          if (request->include_usage) {
            write(stream_usage_chunk(chat, id, created, s.model_name, Usage{g.prompt_tokens, g.completion_tokens, g.reused_tokens}));
          }
          write(stream_done());
        }
        if (!gone) sink.done();
        httplib::Request logged;
        logged.method = method;
        logged.path = path;
        // 499: the client closed the stream before its end (nginx's name for it).
        log_line(s, logged, gone ? 499 : status, g.prompt_tokens, g.completion_tokens, now_s() - start,
                 g.decode_seconds);
        return !gone;
      },
      [release](bool) { release(); });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tern-server: an OpenAI-compatible local server for a Tern bundle"};
  Options opt;
  app.add_option("MODEL", opt.bundle, ".tern bundle")->required();
  app.add_option("--host", opt.host, "address to listen on (default 127.0.0.1: this machine only)");
  app.add_option("--port", opt.port, "port (default 8080; 0 picks a free one and prints it)")->check(CLI::Range(0, 65535));
  app.add_option("--memory-budget", opt.budget, "bytes the server may use: 1G, available, available-25% (0: no limit)");
  app.add_option("--kv", opt.kv, "KV mode: f32, fp16, q8, q4, q3, q2, k4v2, adaptive:B");
  app.add_option("-c,--ctx", opt.ctx, "context tokens per session (0: as many as the budget allows)");
  app.add_option("--sessions", opt.sessions, "concurrent session slots (default 1)")->check(CLI::Range(1u, 256u));
  app.add_option("-t,--threads", opt.threads, "compute threads (0: one per core)");
  app.add_option("--api-key", opt.api_key, "require 'Authorization: Bearer KEY' on every endpoint but /health");
  app.add_option("--timeout", opt.timeout, "seconds a request may wait for a slot, and socket read/write timeouts")
      ->check(CLI::Range(1u, 86400u));
  app.add_option("--queue", opt.queue, "requests that may wait for a slot (default 16); more get 503")
      ->check(CLI::Range(0u, 4096u));
  app.add_option("--max-body", opt.max_body, "largest request body in bytes (default 1 MiB); more gets 413");
  CLI11_PARSE(app, argc, argv);

  Server s;
  s.opt = opt;
  const size_t slash = opt.bundle.find_last_of('/');
  s.model_name = opt.bundle.substr(slash == std::string::npos ? 0 : slash + 1);
  if (s.model_name.size() > 5 && s.model_name.compare(s.model_name.size() - 5, 5, ".tern") == 0) {
    s.model_name.resize(s.model_name.size() - 5);
  }
  s.created = static_cast<int64_t>(std::time(nullptr));
  s.pool = std::make_unique<SlotPool>(opt.sessions, opt.queue);

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  httplib::Server http;
  // Threads for every slot, the queue and a few more so /health answers while all are busy.
  const size_t workers = opt.sessions + opt.queue + 4;
  http.new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
  http.set_payload_max_length(opt.max_body);
  http.set_read_timeout(static_cast<time_t>(opt.timeout), 0);
  http.set_write_timeout(static_cast<time_t>(opt.timeout), 0);
  http.set_pre_routing_handler([&s](const httplib::Request& req, httplib::Response& res) {
    if (s.opt.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + s.opt.api_key) {
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

  http.Get("/health", [&s](const httplib::Request&, httplib::Response& res) {
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
      j["memory"] = {{"budget_bytes", r.budget_bytes},
                     {"planned_bytes", r.planned_total_bytes},
                     {"arena_used_bytes", r.arena_used_bytes},
                     {"kv_mode", r.kv_mode},
                     {"context_tokens", r.context_tokens}};
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
  http.Post("/v1/chat/completions",
            [&s](const httplib::Request& req, httplib::Response& res) { handle_generation(s, req, res, true); });
  http.Post("/v1/completions",
            [&s](const httplib::Request& req, httplib::Response& res) { handle_generation(s, req, res, false); });
  http.Post("/v1/embeddings",
            [&s](const httplib::Request& req, httplib::Response& res) { handle_embeddings(s, req, res); });
  http.Post("/tokenize", [&s](const httplib::Request& req, httplib::Response& res) {
    if (!ensure_ready(s, res)) return;
    const json j = json::parse(req.body, nullptr, false);
    if (!valid_utf8(req.body) || j.is_discarded() || !j.is_object() || !j.contains("content") || !j["content"].is_string()) {
      return reply_error(res, ApiError{400, "expected {\"content\": string, \"add_special\": bool}", "invalid_request_error",
                                       "content", ""});
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
    std::vector<char> text(64 * ids.size() + 16);
    size_t size = 0;
    const tern_status st = tern_detokenize(s.model, ids.data(), ids.size(), text.data(), text.size(), &size);
    if (st != TERN_OK) return reply_error(res, status_error(st, "detokenize"));
    res.set_content(dump(json{{"content", std::string(text.data(), size)}}), "application/json");
  });

  const int port = opt.port == 0 ? http.bind_to_any_port(opt.host) : (http.bind_to_port(opt.host, opt.port) ? opt.port : -1);
  if (port < 0) {
    std::fprintf(stderr, "tern-server: cannot listen on %s:%d\n", opt.host.c_str(), opt.port);
    return 1;
  }
  std::fprintf(stderr, "tern-server: listening on http://%s:%d (model %s, %u session slot%s)\n", opt.host.c_str(),
               port, s.model_name.c_str(), opt.sessions, opt.sessions == 1 ? "" : "s");
  std::printf("%d\n", port);
  std::fflush(stdout);

  // Load while already answering /health ("loading").
  // A model that cannot load ends the server (exit 1, for a supervisor to see).
  std::thread loader([&s, &http] {
    tern_model_params mp = tern_model_default_params();
    if (tern_parse_memory_budget(s.opt.budget.c_str(), &mp.memory_budget_bytes) != TERN_OK) {
      s.load_error = std::string("--memory-budget: ") + tern_last_error_message();
      s.failed = true;
      std::fprintf(stderr, "tern-server: %s\n", s.load_error.c_str());
      stop_server(http);
      return;
    }
    mp.kv_mode = s.opt.kv.c_str();
    mp.n_ctx = s.opt.ctx;
    mp.n_threads = s.opt.threads;
    mp.n_sessions = s.opt.sessions;
    tern_status st = tern_model_load(s.opt.bundle.c_str(), &mp, &s.model);
    if (st == TERN_OK) st = tern_model_get_info(s.model, &s.info);
    if (st == TERN_OK) st = tern_model_get_embedding_info(s.model, &s.embedding);
    tern_memory_report r{};
    if (st == TERN_OK) st = tern_memory_report_get(s.model, &r);
    s.evicting = r.kv_evicting != 0;
    for (unsigned i = 0; i < s.opt.sessions && st == TERN_OK; ++i) {
      tern_session* session = nullptr;
      st = tern_session_create(s.model, nullptr, &session);
      if (st == TERN_OK) s.sessions.push_back(session);
    }
    if (st != TERN_OK) {
      s.load_error = std::string(tern_status_string(st)) + ": " + tern_last_error_message();
      s.failed = true;
      std::fprintf(stderr, "tern-server: %s\n", s.load_error.c_str());
      stop_server(http);
      return;
    }
    std::fprintf(stderr, "tern-server: ready (%s, context %u tokens per session, kv %s, %.1f MiB planned)\n",
                 s.info.chat_format, s.info.context_tokens, r.kv_mode,
                 static_cast<double>(r.planned_total_bytes) / (1024.0 * 1024.0));
    s.ready = true;
  });
  // SIGINT / SIGTERM stop the server from a thread of its own (stop() is not for signal
  // handlers); every other thread has the two blocked, so they arrive here.
  std::thread stopper([&http, signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig != SIGUSR1) std::fprintf(stderr, "tern-server: %s, stopping\n", strsignal(sig));
    if (sig != SIGUSR1) stop_server(http);
  });
  http.listen_after_bind();
  g_listen_returned = true;
  pthread_kill(stopper.native_handle(), SIGUSR1);  // ends the stopper if no signal came
  stopper.join();
  loader.join();
  for (tern_session* session : s.sessions) tern_session_free(session);
  tern_model_free(s.model);
  return s.failed ? 1 : 0;
}
