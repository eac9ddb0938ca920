// tern-bench BUNDLE: prompt processing (pp128: one 128-token prefill) and text generation
// (tg64: 64 single-token decodes) in tokens/s at 1 and 2 threads, like llama-bench.
// Tokens are fixed pseudo-random ids, so no tokenizer or sampling cost is included.
// --verify 2,4,8: the cost of one speculative verification pass of k drafts (k + 1 tokens
// and their logits in one batch) against one decode step, at position pp (medians).
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
  std::vector<unsigned> verify;
  app.add_option("--verify", verify, "draft counts k: time a verification pass of k drafts against a decode step")
      ->check(CLI::Range(1u, tern::kMaxDraftTokens))
      ->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  const unsigned max_draft = verify.empty() ? 0u : *std::max_element(verify.begin(), verify.end());

  if (tg < max_draft + 1) tg = max_draft + 1;  // the verified tokens follow the prompt
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
    params.draft_tokens = max_draft;
    if (max_draft + 1 > params.batch_tokens) params.batch_tokens = max_draft + 1;
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
    if (!verify.empty()) {
      // One decode step, then each verification, from the same position pp (rolled back
      // between timings, untimed). Random drafts: nearly all rejected, the whole pass paid.
      if (s.set_draft_tokens(max_draft) != tern::Error::Ok) {
        std::fprintf(stderr, "tern-bench: %s\n", tern::last_error_message());
        return 1;
      }
      const unsigned steps = 12;
      auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      auto timed = [&](unsigned k) {
        std::vector<double> ms;
        for (unsigned r = 0; r <= steps; ++r) {
          const uint64_t t0 = tern::monotonic_ns();
          const tern::Error e = k == 0 ? s.decode(tokens[pp])
                                       : s.verify_drafts(tokens[pp], tokens.data() + pp + 1, k).error();
          const uint64_t t1 = tern::monotonic_ns();
          if (e != tern::Error::Ok || s.truncate(pp) != tern::Error::Ok) {
            std::fprintf(stderr, "tern-bench: verify: %s\n", tern::last_error_message());
            std::exit(1);
          }
          if (r > 0) ms.push_back(1e3 * tern::seconds_between(t0, t1));
        }
        return median(ms);
      };
      s.reset();
      if (s.prefill(tokens.data(), pp) != tern::Error::Ok) return 1;
      const double decode_ms = timed(0);
      std::printf("| %s | %u | decode step at %u | %.2f ms (1.00x) |\n", name.c_str(), t, pp, decode_ms);
      for (unsigned k : verify) {
        const double v = timed(k);
        std::printf("| %s | %u | verify %u drafts | %.2f ms (%.2fx) |\n", name.c_str(), t, k, v, v / decode_ms);
      }
    }
    std::fprintf(stderr, "load average %.2f after %u thread(s)\n", load[0], t);
    std::fflush(stdout);
    (*model)->destroy_session(&s);
  }
  return 0;
}
