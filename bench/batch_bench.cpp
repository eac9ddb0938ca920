// Sessions decoded together on one bundle: tokens per second of 1, 2, 4, ... streams stepped by
// tern_decode_batch from one thread and by one thread per stream (the model's queue merges
// their passes), against one stream; and the cost of verifying k drafts against one decode
// step. Stream counts run interleaved, --rounds times, and the medians are printed.
//   tern-batch-bench BUNDLE [--streams 1,2,4] [--tokens 64] [--threads 2] [--rounds 3] [--drafts 4]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "include/tern.h"
#include "runtime/engine/session.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

void check(tern_status st, const char* what) {
  if (st != TERN_OK) {
    std::fprintf(stderr, "tern-batch-bench: %s: %s\n", what, tern_last_error_message());
    std::exit(1);
  }
}

struct Bench {
  tern_model* model = nullptr;
  std::vector<tern_session*> sessions;
  std::vector<int32_t> prompt;
  uint32_t tokens = 64;

  // Each session starts from the prompt with its own first token, so the streams differ.
  void start(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      check(tern_session_reset(sessions[i]), "reset");
      std::vector<int32_t> p = prompt;
      p.push_back(static_cast<int32_t>(1000 + 17 * i));
      check(tern_prefill(sessions[i], p.data(), p.size()), "prefill");
    }
  }

  // n streams stepped together by tern_decode_batch: tokens per second.
  double batched(size_t n) {
    start(n);
    std::vector<int32_t> next(n);
    std::vector<tern_batch_entry> entries(n);
    const auto t0 = Clock::now();
    for (uint32_t step = 0; step < tokens; ++step) {
      for (size_t i = 0; i < n; ++i) {
        check(tern_sample(sessions[i], &next[i]), "sample");
        entries[i] = {sessions[i], &next[i], 1, TERN_OK};
      }
      check(tern_decode_batch(entries.data(), n), "decode_batch");
    }
    return static_cast<double>(n) * tokens / seconds_since(t0);
  }

  // n streams, one thread each, decoding on their own: tokens per second of all together.
  double threaded(size_t n) {
    start(n);
    std::vector<std::thread> threads;
    const auto t0 = Clock::now();
    for (size_t i = 0; i < n; ++i) {
      threads.emplace_back([this, i] {
        for (uint32_t step = 0; step < tokens; ++step) {
          int32_t t = 0;
          check(tern_sample(sessions[i], &t), "sample");
          check(tern_decode(sessions[i], t), "decode");
        }
      });
    }
    for (std::thread& t : threads) t.join();
    return static_cast<double>(n) * tokens / seconds_since(t0);
  }

  // Seconds of verifying k drafts (all of them kept: the greedy continuation) over seconds of
  // one decode step, on session 0, `repeats` times each.
  double verify_ratio(uint32_t k, int repeats) {
    start(1);
    check(tern_session_set_draft(sessions[0], k), "set_draft");
    tern::Session& s = *reinterpret_cast<tern::Session*>(sessions[0]);
    uint32_t base = 0;
    check(tern_session_position(sessions[0], &base), "position");
    // The greedy continuation: token, then k drafts.
    std::vector<int32_t> run(k + 1);
    for (uint32_t i = 0; i <= k; ++i) {
      check(tern_sample(sessions[0], &run[i]), "sample");
      check(tern_decode(sessions[0], run[i]), "decode");
    }
    std::vector<double> step, verify;
    for (int r = 0; r < repeats; ++r) {
      check(tern_session_truncate(sessions[0], base), "truncate");
      auto t0 = Clock::now();
      check(tern_decode(sessions[0], run[0]), "decode");
      step.push_back(seconds_since(t0));
      check(tern_session_truncate(sessions[0], base), "truncate");
      t0 = Clock::now();
      auto kept = s.verify_drafts(run[0], run.data() + 1, k);
      verify.push_back(seconds_since(t0));
      if (!kept.ok() || *kept != k) {
        std::fprintf(stderr, "tern-batch-bench: verification kept %u of %u drafts\n", kept.ok() ? *kept : 0, k);
        std::exit(1);
      }
    }
    return median(verify) / median(step);
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Sessions decoded together: tokens per second of N streams against one"};
  std::string bundle;
  std::vector<size_t> streams{1, 2, 4};
  uint32_t tokens = 64, threads = 2, drafts = 4;
  int rounds = 3;
  app.add_option("bundle", bundle, "a .tern bundle")->required();
  app.add_option("--streams", streams, "stream counts")->delimiter(',');
  app.add_option("--tokens", tokens, "decode steps per stream");
  app.add_option("--threads", threads, "the model's threads");
  app.add_option("--rounds", rounds, "rounds (medians are printed)");
  app.add_option("--drafts", drafts, "drafts per verification (0: skip)");
  CLI11_PARSE(app, argc, argv);

  Bench b;
  b.tokens = tokens;
  const size_t max_streams = *std::max_element(streams.begin(), streams.end());
  tern_model_params mp = tern_model_default_params();
  mp.n_ctx = 512;
  mp.n_sessions = static_cast<uint32_t>(max_streams);
  mp.n_threads = threads;
  mp.n_draft = drafts;
  check(tern_model_load(bundle.c_str(), &mp, &b.model), "load");
  for (size_t i = 0; i < max_streams; ++i) {
    tern_session_params sp = tern_session_default_params();
    sp.sampler.temperature = 0.0f;
    tern_session* s = nullptr;
    check(tern_session_create(b.model, &sp, &s), "session");
    b.sessions.push_back(s);
  }
  const char* text = "It is a truth universally acknowledged, that a single man in possession of a good fortune";
  b.prompt.resize(256);
  size_t n = 0;
  check(tern_tokenize(b.model, text, std::strlen(text), true, false, b.prompt.data(), b.prompt.size(), &n), "tokenize");
  b.prompt.resize(n);

  b.batched(1);  // warm-up: the weights paged in
  std::vector<std::vector<double>> together(streams.size()), apart(streams.size());
  for (int r = 0; r < rounds; ++r) {
    for (size_t j = 0; j < streams.size(); ++j) {
      const size_t i = r % 2 ? streams.size() - 1 - j : j;
      together[i].push_back(b.batched(streams[i]));
      apart[i].push_back(b.threaded(streams[i]));
    }
  }
  std::printf("%s, %u threads, %u tokens per stream, medians of %d rounds\n\n", bundle.c_str(), threads, tokens,
              rounds);
  std::printf("| streams | tern_decode_batch tok/s | x one stream | one thread each tok/s | x one stream |\n");
  std::printf("|---:|---:|---:|---:|---:|\n");
  const double one = median(together[0]), one_apart = median(apart[0]);
  for (size_t i = 0; i < streams.size(); ++i) {
    std::printf("| %zu | %.1f | %.2f | %.1f | %.2f |\n", streams[i], median(together[i]), median(together[i]) / one,
                median(apart[i]), median(apart[i]) / one_apart);
  }
  if (drafts > 0) {
    std::printf("\n%u drafts verified (all kept): %.2f x one decode step\n", drafts,
                b.verify_ratio(drafts, 5 * rounds));
  }
  for (tern_session* s : b.sessions) tern_session_free(s);
  tern_model_free(b.model);
  return 0;
}
