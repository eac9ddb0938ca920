// tern-bench BUNDLE: prompt processing (pp128: one 128-token prefill) and text generation
// (tg64: 64 single-token decodes) in tokens/s at 1 and 2 threads, like llama-bench.
// Tokens are fixed pseudo-random ids, so no tokenizer or sampling cost is included.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/ternary_matmul.h"
#include "platform/clock.h"
#include "runtime/model.h"
#include "runtime/session.h"

namespace {

struct Sample {
  double mean = 0.0, stddev = 0.0;
};

Sample summarize(const std::vector<double>& v) {
  Sample s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.stddev += (x - s.mean) * (x - s.mean);
  s.stddev = v.size() > 1 ? std::sqrt(s.stddev / static_cast<double>(v.size() - 1)) : 0.0;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Prefill and decode throughput of a Tern bundle"};
  std::string bundle;
  unsigned pp = 128, tg = 64, reps = 2;
  std::vector<unsigned> threads = {1, 2};
  std::string kv = "f32";
  app.add_option("BUNDLE", bundle, ".tern bundle")->required();
  app.add_option("-p,--pp", pp, "prompt tokens per prefill")->check(CLI::PositiveNumber);
  app.add_option("-n,--tg", tg, "generated tokens per run")->check(CLI::PositiveNumber);
  app.add_option("-r,--reps", reps, "repetitions (after one warm-up)")->check(CLI::PositiveNumber);
  app.add_option("-t,--threads", threads, "thread counts")->expected(1, -1);
  app.add_option("--kv", kv, "KV mode: f32, fp16 (dense), q8, q4, q3, q2, k4v2, adaptive:B (compressed)");
  CLI11_PARSE(app, argc, argv);

  std::vector<int32_t> tokens(pp + tg);
  uint32_t state = 12345;
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  // The numbers mean little on a busy machine: say how busy it was.
  std::printf("kernels %s, load average %.2f at start\n\n", tern::to_string(tern::active_isa_level()), load[0]);
  std::printf("| model | threads | test | tokens/s |\n| --- | ---: | --- | ---: |\n");
  std::fflush(stdout);
  for (unsigned t : threads) {
    tern::ModelParams params;
    params.threads = t;
    params.context_tokens = pp + tg;
    params.batch_tokens = pp;
    params.kv_mode = kv.c_str();
    auto model = tern::Model::load(bundle.c_str(), params);
    if (!model.ok()) {
      std::fprintf(stderr, "tern-bench: %s\n", tern::last_error_message());
      return 1;
    }
    const uint32_t vocab = (*model)->config().vocab;
    for (auto& id : tokens) {
      state = state * 1664525u + 1013904223u;
      id = static_cast<int32_t>((state >> 8) % vocab);
    }
    auto session = (*model)->create_session(tern::SamplerParams{});
    if (!session.ok()) {
      std::fprintf(stderr, "tern-bench: %s\n", tern::last_error_message());
      return 1;
    }
    tern::Session& s = **session;
    std::vector<double> pp_rates, tg_rates;
    for (unsigned r = 0; r <= reps; ++r) {  // r == 0 warms up (pages in the weights)
      s.reset();
      const uint64_t t0 = tern::monotonic_ns();
      if (s.prefill(tokens.data(), pp) != tern::Error::Ok) {
        std::fprintf(stderr, "tern-bench: prefill: %s\n", tern::last_error_message());
        return 1;
      }
      const uint64_t t1 = tern::monotonic_ns();
      for (unsigned i = 0; i < tg; ++i) {
        if (s.decode(tokens[pp + i]) != tern::Error::Ok) {
          std::fprintf(stderr, "tern-bench: decode: %s\n", tern::last_error_message());
          return 1;
        }
      }
      const uint64_t t2 = tern::monotonic_ns();
      if (r == 0) continue;
      pp_rates.push_back(pp / tern::seconds_between(t0, t1));
      tg_rates.push_back(tg / tern::seconds_between(t1, t2));
    }
    const std::string name = bundle.substr(bundle.find_last_of('/') + 1);
    const Sample a = summarize(pp_rates), b = summarize(tg_rates);
    getloadavg(load, 3);
    std::printf("| %s | %u | pp%u | %.2f ± %.2f |\n", name.c_str(), t, pp, a.mean, a.stddev);
    std::printf("| %s | %u | tg%u | %.2f ± %.2f |\n", name.c_str(), t, tg, b.mean, b.stddev);
    std::fprintf(stderr, "load average %.2f after %u thread(s)\n", load[0], t);
    std::fflush(stdout);
    (*model)->destroy_session(&s);
  }
  return 0;
}
