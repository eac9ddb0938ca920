// The sampler per token on a LLaMA-3-sized vocabulary (128,256 logits): a draw as tern_sample()
// makes it, and the log-probabilities beside it (OpenAI's logprobs, with 0 and 20 alternatives).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "runtime/base/arena.h"
#include "runtime/engine/sampler.h"

namespace {

constexpr uint32_t kVocab = 128256;

struct Setup {
  std::vector<uint8_t> memory = std::vector<uint8_t>(tern::Sampler::required_arena_bytes(kVocab) + 4096);
  tern::ArenaAllocator arena{memory.data(), memory.size()};
  tern::Sampler sampler;
  std::vector<float> logits = std::vector<float>(kVocab);
  std::vector<int32_t> history = std::vector<int32_t>(64);
  explicit Setup(float temperature) {
    if (sampler.init(kVocab, arena) != tern::Error::Ok) std::abort();
    tern::SamplerParams p;  // top-k 40, top-p 0.95, min-p 0.05
    p.temperature = temperature;
    p.repeat_penalty = 1.1f;
    if (sampler.configure(p) != tern::Error::Ok) std::abort();
    std::mt19937 rng(36);
    std::normal_distribution<float> normal(0.0f, 2.5f);
    for (float& l : logits) l = normal(rng);
    std::uniform_int_distribution<int32_t> id(0, kVocab - 1);
    for (int32_t& t : history) t = id(rng);
  }
};

void BM_Sample(benchmark::State& state) {
  Setup s(state.range(0) / 100.0f);
  for (auto _ : state) {
    benchmark::DoNotOptimize(s.sampler.sample(s.logits.data(), s.history.data(), s.history.size()));
  }
}
BENCHMARK(BM_Sample)->Arg(0)->Arg(80)->Unit(benchmark::kMicrosecond);

void BM_LogProbabilities(benchmark::State& state) {
  Setup s(0.8f);
  tern::TokenLogprob top[tern::kMaxTopLogprobs];
  uint32_t n_top = 0;
  const uint32_t top_n = static_cast<uint32_t>(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        s.sampler.log_probabilities(s.logits.data(), s.history.data(), s.history.size(), 42, top, top_n, &n_top));
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_LogProbabilities)->Arg(0)->Arg(1)->Arg(5)->Arg(20)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
