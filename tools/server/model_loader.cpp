// Loading tern-server's model through the C API (model_loader.h).
#include "tools/server/model_loader.h"

#include <cstdio>

#include "tools/common/model_options.h"

namespace tern::server {

namespace {

void fail(ServerState& s, const std::string& why, const std::function<void()>& stop) {
  s.load_error = why;
  s.failed = true;
  std::fprintf(stderr, "tern-server: %s\n", s.load_error.c_str());
  stop();
}

}  // namespace

std::string model_name_of(const std::string& bundle) {
  const size_t slash = bundle.find_last_of('/');
  std::string name = bundle.substr(slash == std::string::npos ? 0 : slash + 1);
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".tern") == 0) name.resize(name.size() - 5);
  return name;
}

void load_model(ServerState& s, const std::function<void()>& stop) {
  tern_model_params mp;
  if (cli::to_model_params(s.opt.model, &mp) != TERN_OK) {
    return fail(s, std::string("--memory-budget: ") + tern_last_error_message(), stop);
  }
  if (tern_parse_byte_size(s.opt.grammar_memory.c_str(), &mp.grammar_bytes) != TERN_OK) {
    return fail(s, std::string("--grammar-memory: ") + tern_last_error_message(), stop);
  }
  mp.n_sessions = s.opt.sessions;
  tern_status st = cli::verify_bundle_if_asked(s.opt.model, s.opt.bundle.c_str(), "tern-server");
  if (st == TERN_OK) st = tern_model_load(s.opt.bundle.c_str(), &mp, &s.model);
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
  if (st != TERN_OK) return fail(s, std::string(tern_status_string(st)) + ": " + tern_last_error_message(), stop);
  std::fprintf(stderr, "tern-server: ready (%s, context %u tokens per session, kv %s, %.1f MiB planned)\n",
               s.info.chat_format, s.info.context_tokens, r.kv_mode,
               static_cast<double>(r.planned_total_bytes) / (1024.0 * 1024.0));
  s.ready = true;
}

void free_model(ServerState& s) {
  for (tern_session* session : s.sessions) tern_session_free(session);
  s.sessions.clear();
  tern_model_free(s.model);
  s.model = nullptr;
}

}  // namespace tern::server
