// tern-chat-prefix-bench BUNDLE [--text FILE] [--tokens N] [--rounds R]: time to first token of
// a conversation's second turn, with prefix reuse (the session holds the first turn, so only
// the new message is prefilled) and without (a session that holds nothing), interleaved round
// by round through tern_chat_complete. The first turn is a user message of about N tokens of
// the text and a greedy reply; the second asks one more question.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "include/tern.h"

namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "tern-chat-prefix-bench: %s: %s\n", what, tern_last_error_message());
  std::exit(1);
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Seconds from the call to its first reply event, and the call's result.
struct Turn {
  double start = 0, first = -1;
  std::string reply;
  tern_chat_result result{};
};

int on_event(const tern_chat_event* e, void* user) {
  auto* t = static_cast<Turn*>(user);
  if (t->first < 0) t->first = now_s() - t->start;
  if (e->type == TERN_CHAT_CONTENT) t->reply.append(e->text, e->size);
  return 0;
}

Turn run(tern_session* session, const tern_chat_request& r) {
  Turn t;
  t.start = now_s();
  if (tern_chat_complete(session, &r, on_event, &t, &t.result) != TERN_OK) die("tern_chat_complete");
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time to first token of a second turn, with and without prefix reuse"};
  std::string bundle, text_file = TERN_SOURCE_DIR "/tests/data/corpus/austen-head.txt";
  unsigned tokens = 1500, rounds = 5, threads = 0, reply = 16;
  app.add_option("BUNDLE", bundle, ".tern bundle with a chat format")->required();
  app.add_option("--text", text_file, "text the first message quotes");
  app.add_option("--tokens", tokens, "tokens in the conversation's first turn (about)");
  app.add_option("-r,--rounds", rounds, "rounds")->check(CLI::PositiveNumber);
  app.add_option("-t,--threads", threads, "compute threads (0: every core)");
  app.add_option("--reply", reply, "tokens of each reply")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  std::ifstream in(text_file);
  if (!in) {
    std::fprintf(stderr, "tern-chat-prefix-bench: cannot read %s\n", text_file.c_str());
    return 1;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string corpus = buf.str();

  tern_model_params mp = tern_model_default_params();
  mp.n_threads = threads;
  mp.n_ctx = tokens + 256;
  mp.n_sessions = 2;
  tern_model* model = nullptr;
  if (tern_model_load(bundle.c_str(), &mp, &model) != TERN_OK) die(bundle.c_str());
  tern_session* warm = nullptr;
  tern_session* cold = nullptr;
  if (tern_session_create(model, nullptr, &warm) != TERN_OK || tern_session_create(model, nullptr, &cold) != TERN_OK) {
    die("session");
  }
  // A first message of about `tokens` tokens of the text.
  std::string message = "Read this and answer my questions.\n\n";
  std::vector<int32_t> ids(corpus.size() + 16);
  size_t n = 0;
  for (size_t take = 256; take <= corpus.size(); take += 256) {
    if (tern_tokenize(model, corpus.data(), take, 0, 0, ids.data(), ids.size(), &n) != TERN_OK) die("tokenize");
    if (n >= tokens) {
      message += corpus.substr(0, take);
      break;
    }
  }
  if (n < tokens) message += corpus;

  tern_chat_turn turns[3] = {{"user", message.c_str(), nullptr, 0, nullptr},
                             {"assistant", "", nullptr, 0, nullptr},
                             {"user", "Who is the first person named in it?", nullptr, 0, nullptr}};
  tern_chat_request first = tern_chat_default_request();
  first.messages = turns;
  first.n_messages = 1;
  first.max_tokens = reply;
  first.sampler.temperature = 0.0f;
  const Turn one = run(warm, first);
  uint32_t after_first = 0;  // what the warm session holds after the first turn
  tern_session_position(warm, &after_first);
  turns[1].content = one.reply.c_str();
  tern_chat_request second = first;
  second.n_messages = 3;

  std::vector<double> reuse, fresh;
  uint32_t prompt = 0, cached = 0;
  for (unsigned round = 0; round < rounds; ++round) {
    // With reuse: the warm session holds the first turn (its reply's tokens included).
    if (tern_session_truncate(warm, after_first) != TERN_OK) die("truncate");
    const Turn a = run(warm, second);
    // Without: a session that holds nothing.
    tern_session_reset(cold);
    const Turn b = run(cold, second);
    if (a.reply != b.reply) std::fprintf(stderr, "tern-chat-prefix-bench: the replies differ\n");
    reuse.push_back(a.first);
    fresh.push_back(b.first);
    prompt = a.result.prompt_tokens;
    cached = a.result.cached_tokens;
    std::printf("round %u: reuse %.3f s (cached %u of %u), fresh %.3f s\n", round, a.first, a.result.cached_tokens,
                a.result.prompt_tokens, b.first);
  }
  tern_model_info info{};
  tern_model_get_info(model, &info);
  std::printf(
      "second turn of a %u-token conversation (%u threads): time to first token %.3f s with prefix reuse "
      "(%u tokens cached), %.3f s without: %.1fx\n",
      prompt, info.n_threads, median(reuse), cached, median(fresh), median(fresh) / median(reuse));
  tern_session_free(warm);
  tern_session_free(cold);
  tern_model_free(model);
  return 0;
}
