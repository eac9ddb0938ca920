// llama_grammar_bench: llama.cpp's decode speed with sampling, unconstrained and under GBNF
// grammars, by tern-grammar-bench's procedure, for docs/perf: one context per mode, every
// round prefills the same pseudo-random prompt in each and times -n tokens of
// common_sampler_sample + common_sampler_accept + llama_decode, in a rotating order; a grammar
// that completes (an end-of-generation token) is started again with a new sampler, inside the
// timed sampling. The sampler is llama.cpp's own common_sampler with its defaults (top-k 40,
// top-p 0.95, min-p 0.05, temperature 0.8: Tern's defaults too), including its grammar
// strategy (sample first, apply the grammar to every candidate only when the sampled token
// does not fit).
//
// Built outside Tern's tree against a llama.cpp checkout (bench/peers/llama_grammar_bench.sh);
// none of llama.cpp's code is in this repository.
//   llama_grammar_bench MODEL.gguf THREADS TOKENS ROUNDS PROMPT_TOKENS [GRAMMAR.gbnf ...]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/grammar_bench_table.h"
#include "common.h"
#include "llama.h"
#include "sampling.h"

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Mode : tern::bench::ModeResults {
  llama_context* ctx = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s MODEL.gguf THREADS TOKENS ROUNDS PROMPT_TOKENS [GRAMMAR.gbnf ...]\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[2]), n = std::atoi(argv[3]), rounds = std::atoi(argv[4]),
            prompt = std::atoi(argv[5]);
  std::vector<Mode> modes(1);
  modes[0].name = "unconstrained";
  for (int i = 6; i < argc; ++i) {
    std::ifstream in(argv[i]);
    std::stringstream ss;
    ss << in.rdbuf();
    Mode m;
    m.name = std::string(argv[i]).substr(std::string(argv[i]).find_last_of('/') + 1);
    m.grammar = ss.str();
    modes.push_back(m);
  }
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) return 1;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  for (Mode& m : modes) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = prompt + n + 16;
    cp.n_batch = prompt;
    cp.n_threads = cp.n_threads_batch = threads;
    m.ctx = llama_init_from_model(model, cp);
    if (m.ctx == nullptr) return 1;
  }
  std::vector<llama_token> ids(prompt);
  uint32_t state = 12345;
  for (auto& id : ids) {
    state = state * 1664525u + 1013904223u;
    id = static_cast<llama_token>((state >> 8) % llama_vocab_n_tokens(vocab));
  }
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  std::printf("llama.cpp, %d thread(s), load average %.2f at start\n\n", threads, load[0]);
  for (int round = 0; round <= rounds; ++round) {  // round 0 warms up
    std::vector<double> rate(modes.size());
    for (size_t k = 0; k < modes.size(); ++k) {
      Mode& m = modes[(k + round) % modes.size()];
      common_params_sampling sp;
      sp.seed = 1000 + round;
      if (!m.grammar.empty()) sp.grammar = common_grammar(COMMON_GRAMMAR_TYPE_USER, m.grammar);
      common_sampler* smpl = common_sampler_init(model, sp);
      if (smpl == nullptr) {
        std::fprintf(stderr, "%s: the grammar was refused\n", m.name.c_str());
        return 1;
      }
      llama_memory_clear(llama_get_memory(m.ctx), true);
      if (llama_decode(m.ctx, llama_batch_get_one(ids.data(), prompt)) != 0) return 1;
      double sample_s = 0, decode_s = 0;
      const double t0 = now();
      for (int i = 0; i < n; ++i) {
        const double a = now();
        llama_token t = common_sampler_sample(smpl, m.ctx, -1);
        common_sampler_accept(smpl, t, true);
        if (!m.grammar.empty() && llama_vocab_is_eog(vocab, t)) {  // complete: start another sentence
          // common_sampler_reset() resets only the sampler chain, not the grammar (which would
          // then allow nothing but the end token): a new sampler parses the grammar again.
          common_sampler_free(smpl);
          sp.seed += 7919;
          smpl = common_sampler_init(model, sp);
          ++m.restarts;
        }
        const double b = now();
        if (llama_decode(m.ctx, llama_batch_get_one(&t, 1)) != 0) return 1;
        const double c = now();
        sample_s += b - a;
        decode_s += c - b;
      }
      const double seconds = now() - t0;
      common_sampler_free(smpl);
      if (round == 0) continue;
      rate[(k + round) % modes.size()] =
          tern::bench::record_run(m, static_cast<unsigned>(n), seconds, sample_s, decode_s);
    }
    if (round != 0) tern::bench::add_round(modes, rate);
  }
  getloadavg(load, 3);
  tern::bench::print_table(modes, static_cast<unsigned>(rounds), static_cast<unsigned>(n), load[0]);
  for (Mode& m : modes) llama_free(m.ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
