// The sampler per token on a LLaMA-3-sized vocabulary (128,256 logits), one thread: a draw as
// tern_sample() makes it under each setting users pick, and the log-probabilities beside it
// (OpenAI's logprobs, with 0 and 20 alternatives).
//
// Two logit shapes (the second benchmark argument): 0 "normal", N(0, 2.5) over the whole
// vocabulary, whose top-p 0.95 nucleus holds thousands of tokens; 1 "peaked", a trained model's
// shape: a Zipf-like head (logit 18 - 2.2 ln rank) over a N(-2, 2) body, where a few dozen
// tokens hold nearly all the mass. 64 random tokens of history.
//
// Built as tern-sampler-peer-bench (CMake -DTERN_LLAMA_DIR=<llama.cpp checkout with a static
// build in build/>), it also times llama.cpp's sampler chain on the same logits and history
// with the same parameters (BM_LlamaChain): penalties, top-k, top-p, min-p, temperature,
// dist, in llama.cpp's default order, or greedy; each call first fills the candidate array
// from the logits, as common_sampler does per token. Run both with
// --benchmark_enable_random_interleaving=true --benchmark_repetitions=N.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include "runtime/base/arena.h"
#include "runtime/engine/sampler.h"

#if defined(TERN_SAMPLER_PEERS)
#include "llama.h"
#endif

namespace {

constexpr uint32_t kVocab = 128256;

enum Setting : int64_t {
  kDefault,      // temperature 0.8, top-k 40, top-p 0.95, min-p 0.05
  kPenalties,    // the default with repetition 1.1, frequency 0.2 and presence 0.3 over 64 tokens
  kTopPOnly,     // temperature 0.8, top-k 0, top-p 0.95, min-p 0
  kMinPOnly,     // temperature 0.8, top-k 0, top-p 1, min-p 0.05
  kTemperature,  // temperature 0.8 alone: the whole softmax
  kGreedy,       // temperature 0
};

tern::SamplerParams params_for(int64_t setting) {
  tern::SamplerParams p;  // temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, no penalty
  switch (setting) {
    case kPenalties:
      p.repeat_penalty = 1.1f;
      p.frequency_penalty = 0.2f;
      p.presence_penalty = 0.3f;
      break;
    case kTopPOnly:
      p.top_k = 0;
      p.min_p = 0.0f;
      break;
    case kMinPOnly:
      p.top_k = 0;
      p.top_p = 1.0f;
      break;
    case kTemperature:
      p.top_k = 0;
      p.top_p = 1.0f;
      p.min_p = 0.0f;
      break;
    case kGreedy: p.temperature = 0.0f; break;
    default: break;
  }
  return p;
}

std::vector<float> make_logits(int64_t shape) {
  std::vector<float> logits(kVocab);
  std::mt19937 rng(36);
  if (shape == 0) {
    std::normal_distribution<float> normal(0.0f, 2.5f);
    for (float& l : logits) l = normal(rng);
    return logits;
  }
  std::normal_distribution<float> body(-2.0f, 2.0f);
  for (float& l : logits) l = body(rng);
  std::vector<int32_t> ids(kVocab);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  for (int32_t rank = 0; rank < 2000; ++rank) {
    logits[ids[rank]] = std::max(logits[ids[rank]], 18.0f - 2.2f * std::log(static_cast<float>(rank + 1)));
  }
  return logits;
}

struct Setup {
  std::vector<uint8_t> memory = std::vector<uint8_t>(tern::Sampler::required_arena_bytes(kVocab) + 4096);
  tern::ArenaAllocator arena{memory.data(), memory.size()};
  tern::Sampler sampler;
  std::vector<float> logits;
  std::vector<int32_t> history = std::vector<int32_t>(64);
  Setup(const tern::SamplerParams& p, int64_t shape) : logits(make_logits(shape)) {
    if (sampler.init(kVocab, arena) != tern::Error::Ok) std::abort();
    if (sampler.configure(p) != tern::Error::Ok) std::abort();
    std::mt19937 rng(37);
    std::uniform_int_distribution<int32_t> id(0, kVocab - 1);
    for (int32_t& t : history) t = id(rng);
  }
};

void BM_Sample(benchmark::State& state) {
  Setup s(params_for(state.range(0)), state.range(1));
  for (auto _ : state) {
    benchmark::DoNotOptimize(s.sampler.sample(s.logits.data(), s.history.data(), s.history.size()));
  }
}
BENCHMARK(BM_Sample)
    ->ArgNames({"setting", "shape"})
    ->ArgsProduct({{kDefault, kPenalties, kTopPOnly, kMinPOnly, kTemperature, kGreedy}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

// The logprobs OpenAI's API returns: temperature 0.8, no penalty (they apply as when sampling).
void BM_LogProbabilities(benchmark::State& state) {
  Setup s(params_for(kDefault), state.range(1));
  tern::TokenLogprob top[tern::kMaxTopLogprobs];
  uint32_t n_top = 0;
  const uint32_t top_n = static_cast<uint32_t>(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        s.sampler.log_probabilities(s.logits.data(), s.history.data(), s.history.size(), 42, top, top_n, &n_top));
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_LogProbabilities)
    ->ArgNames({"top_n", "shape"})
    ->ArgsProduct({{0, 20}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

#if defined(TERN_SAMPLER_PEERS)
struct LlamaSetup {
  std::vector<float> logits;
  std::vector<llama_token_data> cur = std::vector<llama_token_data>(kVocab);
  llama_sampler* chain = nullptr;
  LlamaSetup(const tern::SamplerParams& p, int64_t shape) : logits(make_logits(shape)) {
    llama_sampler_chain_params cp = llama_sampler_chain_default_params();
    cp.no_perf = true;
    chain = llama_sampler_chain_init(cp);
    if (p.temperature == 0.0f) {
      llama_sampler_chain_add(chain, llama_sampler_init_greedy());
      return;
    }
    if (p.repeat_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
      llama_sampler_chain_add(chain, llama_sampler_init_penalties(kVocab, p.repeat_last_n, p.repeat_penalty,
                                                                  p.frequency_penalty, p.presence_penalty));
    }
    if (p.top_k > 0) llama_sampler_chain_add(chain, llama_sampler_init_top_k(p.top_k));
    if (p.top_p < 1.0f) llama_sampler_chain_add(chain, llama_sampler_init_top_p(p.top_p, 1));
    if (p.min_p > 0.0f) llama_sampler_chain_add(chain, llama_sampler_init_min_p(p.min_p, 1));
    llama_sampler_chain_add(chain, llama_sampler_init_temp(p.temperature));
    llama_sampler_chain_add(chain, llama_sampler_init_dist(static_cast<uint32_t>(p.seed)));
    std::mt19937 rng(37);  // the same history as Setup's
    std::uniform_int_distribution<int32_t> id(0, kVocab - 1);
    for (int i = 0; i < 64; ++i) llama_sampler_accept(chain, id(rng));
  }
  ~LlamaSetup() { llama_sampler_free(chain); }
};

void BM_LlamaChain(benchmark::State& state) {
  LlamaSetup s(params_for(state.range(0)), state.range(1));
  for (auto _ : state) {
    for (uint32_t i = 0; i < kVocab; ++i) s.cur[i] = llama_token_data{static_cast<llama_token>(i), s.logits[i], 0.0f};
    llama_token_data_array a{s.cur.data(), kVocab, -1, false};
    llama_sampler_apply(s.chain, &a);
    benchmark::DoNotOptimize(a.data[a.selected].id);
  }
}
BENCHMARK(BM_LlamaChain)
    ->ArgNames({"setting", "shape"})
    ->ArgsProduct({{kDefault, kPenalties, kTopPOnly, kMinPOnly, kTemperature, kGreedy}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);
#endif

}  // namespace

BENCHMARK_MAIN();
