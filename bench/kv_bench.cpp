// Mixed-precision KV attention: one query head over a 2k-token history (2B-4T head
// dim 128), all-f16 vs 4 exact sinks + quantized 32-token blocks + 32 exact recent.
//   tern-kv-bench --benchmark_filter=Attend
// And the dense f32 cache's attention per ISA (BM_DenseAttendGroup).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/dense_attention.h"
#include "kernels/dense_matmul.h"
#include "kernels/kv_attention.h"

namespace tern {
namespace {

constexpr uint32_t kHeadDim = 128, kTokens = 2048, kSinks = 4, kRecent = 32, kBlock = 32, kGroup = 32;

struct History {
  std::vector<uint16_t> exact_k, exact_v;  // f16: sinks + recent (or everything in f16 mode)
  std::vector<uint8_t> blocks;
  std::vector<KvSegment> segs;
  KvQuantLayout layout;
};

std::vector<float> random_rows(size_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(rows * kHeadDim);
  for (auto& v : x) v = n(rng);
  return x;
}

History make_history(uint32_t bits, Isa isa) {
  History h;
  h.layout = KvQuantLayout{bits, bits, kBlock, kGroup};
  const auto k = random_rows(kTokens, 1), v = random_rows(kTokens, 2);
  if (bits == 16) {
    for (float x : k) h.exact_k.push_back(f32_to_f16(x));
    for (float x : v) h.exact_v.push_back(f32_to_f16(x));
    h.segs.push_back({KvSegmentKind::ExactF16, kTokens, h.exact_k.data(), h.exact_v.data()});
    return h;
  }
  const uint32_t middle = kTokens - kSinks - kRecent, blocks = middle / kBlock;
  for (uint32_t i = 0; i < (kSinks + kRecent) * kHeadDim; ++i) {
    const size_t src = i < kSinks * kHeadDim ? i : (kTokens - kSinks - kRecent) * kHeadDim + i;
    h.exact_k.push_back(f32_to_f16(k[src]));
    h.exact_v.push_back(f32_to_f16(v[src]));
  }
  const size_t key_bytes = kv_key_block_bytes(bits, kHeadDim, kBlock);
  const size_t row_bytes = kv_value_row_bytes(bits, kHeadDim, kGroup);
  // Key blocks contiguous, then value blocks: each pass streams one region.
  h.blocks.resize(blocks * (key_bytes + kBlock * row_bytes) + kKvReadPadding);
  uint8_t* value_base = h.blocks.data() + blocks * key_bytes;
  h.segs.push_back({KvSegmentKind::ExactF16, kSinks, h.exact_k.data(), h.exact_v.data()});
  for (uint32_t b = 0; b < blocks; ++b) {
    uint8_t* block = h.blocks.data() + b * key_bytes;
    uint8_t* values = value_base + b * kBlock * row_bytes;
    const size_t first = (kSinks + static_cast<size_t>(b) * kBlock) * kHeadDim;
    kv_quantize_key_block(isa, k.data() + first, kBlock, kHeadDim, bits, block);
    for (uint32_t t = 0; t < kBlock; ++t)
      kv_quantize_value_row(isa, v.data() + first + t * kHeadDim, kHeadDim, kGroup, bits, values + t * row_bytes);
    h.segs.push_back({KvSegmentKind::Quantized, kBlock, block, values});
  }
  h.segs.push_back(
      {KvSegmentKind::ExactF16, kRecent, h.exact_k.data() + kSinks * kHeadDim, h.exact_v.data() + kSinks * kHeadDim});
  return h;
}

// False (and the benchmark marked skipped) when this CPU lacks `isa`.
bool runs_here(Isa isa, benchmark::State& state) {
  if (isa_supported(isa, cpu_features())) return true;
  state.SkipWithError("ISA not supported here");
  return false;
}

void BM_Attend(benchmark::State& state) {
  const uint32_t bits = static_cast<uint32_t>(state.range(0));
  const Isa isa = static_cast<Isa>(state.range(1));
  if (!runs_here(isa, state)) return;
  const History h = make_history(bits, isa);
  uint32_t tokens = 0;
  for (const auto& s : h.segs) tokens += s.tokens;
  const auto q = random_rows(1, 3);
  std::vector<float> scores(tokens), out(kHeadDim);
  for (auto _ : state) {
    kv_attend(isa, h.segs.data(), h.segs.size(), h.layout, kHeadDim, q.data(), 0.088f, scores.data(), out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens) * state.iterations(), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(to_string(isa)) + (bits == 16 ? " f16" : " q" + std::to_string(bits)));
}

void attend_args(benchmark::internal::Benchmark* b) {
  for (int isa : {0, 1, 2, 3})
    for (int bits : {16, 8, 4, 3, 2}) b->Args({bits, isa});
}
BENCHMARK(BM_Attend)->Apply(attend_args);

// One decode step's attention reads for bitnet-b1.58-2B-4T at 2k context: 30 layers x 5
// KV heads, one query each, every history a separate allocation, 157 MB in f16 — far
// beyond the caches, so this is the memory-bound regime a phone decodes in.
void BM_AttendAllHeads(benchmark::State& state) {
  const uint32_t bits = static_cast<uint32_t>(state.range(0));
  const Isa isa = active_isa_level();
  constexpr int kHeads = 150;
  std::vector<History> heads;
  heads.reserve(kHeads);
  size_t bytes = 0;
  for (int i = 0; i < kHeads; ++i) {
    heads.push_back(make_history(bits, isa));
    bytes += heads.back().exact_k.size() * 4 + heads.back().blocks.size();
  }
  const auto q = random_rows(1, 3);
  std::vector<float> scores(kTokens), out(kHeadDim);
  for (auto _ : state) {
    for (const History& h : heads) {
      kv_attend(isa, h.segs.data(), h.segs.size(), h.layout, kHeadDim, q.data(), 0.088f, scores.data(), out.data());
      benchmark::DoNotOptimize(out.data());
    }
  }
  state.counters["cache_MB"] = static_cast<double>(bytes) / 1e6;
  state.counters["steps/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(to_string(isa)) + (bits == 16 ? " f16" : " q" + std::to_string(bits)));
}
BENCHMARK(BM_AttendAllHeads)->Arg(16)->Arg(8)->Arg(4)->Arg(2)->Unit(benchmark::kMillisecond);

// The 4 query heads of a 2B-4T GQA group over one 2k history: one pass over the blocks
// for all four (range(1) = 1) vs four single-query passes (range(1) = 0).
void BM_AttendGroup(benchmark::State& state) {
  const uint32_t bits = static_cast<uint32_t>(state.range(0));
  const bool grouped = state.range(1) != 0;
  const Isa isa = active_isa_level();
  const History h = make_history(bits, isa);
  uint32_t tokens = 0;
  for (const auto& s : h.segs) tokens += s.tokens;
  constexpr uint32_t kGroupQueries = 4;
  const auto q = random_rows(kGroupQueries, 3);
  std::vector<float> scores(kGroupQueries * tokens), out(kGroupQueries * kHeadDim);
  for (auto _ : state) {
    if (grouped) {
      size_t at = 0;
      for (const auto& seg : h.segs) {
        kv_segment_scores_multi(isa, seg, h.layout, kHeadDim, q.data(), kGroupQueries, 0.088f, scores.data() + at,
                                tokens);
        at += seg.tokens;
      }
      for (uint32_t i = 0; i < kGroupQueries; ++i) kv_softmax(scores.data() + i * tokens, tokens);
      std::fill(out.begin(), out.end(), 0.0f);
      at = 0;
      for (const auto& seg : h.segs) {
        kv_segment_accumulate_multi(isa, seg, h.layout, kHeadDim, scores.data() + at, tokens, kGroupQueries,
                                    out.data());
        at += seg.tokens;
      }
    } else {
      for (uint32_t i = 0; i < kGroupQueries; ++i)
        kv_attend(isa, h.segs.data(), h.segs.size(), h.layout, kHeadDim, q.data() + i * kHeadDim, 0.088f, scores.data(),
                  out.data() + i * kHeadDim);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["query_tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens) * kGroupQueries * state.iterations(), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(to_string(isa)) + (bits == 16 ? " f16" : " q" + std::to_string(bits)) +
                 (grouped ? " grouped" : " one at a time"));
}
BENCHMARK(BM_AttendGroup)->Args({16, 0})->Args({16, 1})->Args({4, 0})->Args({4, 1})->Args({2, 0})->Args({2, 1});

// The dense f32 cache (KvCache::key_blocks / value_rows): the 4 query heads of a 2B-4T GQA
// group over a 2k history (2 MB of keys and values), per ISA (range(0): Isa), one
// decode step's scores, softmax and weighted values.
void BM_DenseAttendGroup(benchmark::State& state) {
  const Isa isa = static_cast<Isa>(state.range(0));
  if (!runs_here(isa, state)) return;
  constexpr uint32_t kGroupQueries = 4;
  const auto rows = random_rows(kTokens, 1), values = random_rows(kTokens, 2);
  std::vector<float> keys(rows.size());
  for (uint32_t p = 0; p < kTokens; ++p)
    for (uint32_t i = 0; i < kHeadDim; ++i) keys[kv_key_index(p, i, kHeadDim, kTokens)] = rows[p * kHeadDim + i];
  const auto q = random_rows(kGroupQueries, 3);
  std::vector<float> scores(kGroupQueries * kTokens), out(kGroupQueries * kHeadDim);
  for (auto _ : state) {
    dense_attention_scores(isa, q.data(), kGroupQueries, kHeadDim, keys.data(), kTokens, kTokens, 0.088f, scores.data(),
                           kTokens);
    for (uint32_t i = 0; i < kGroupQueries; ++i) kv_softmax(scores.data() + i * kTokens, kTokens);
    dense_attention_values(isa, scores.data(), kTokens, kGroupQueries, values.data(), kHeadDim, kTokens, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["query_tokens/s"] = benchmark::Counter(
      static_cast<double>(kTokens) * kGroupQueries * state.iterations(), benchmark::Counter::kIsRate);
  state.SetLabel(to_string(isa));
}
BENCHMARK(BM_DenseAttendGroup)->DenseRange(0, 3)->ArgName("isa");

void BM_QuantizeBlock(benchmark::State& state) {
  const uint32_t bits = static_cast<uint32_t>(state.range(0));
  const Isa isa = static_cast<Isa>(state.range(1));
  if (!runs_here(isa, state)) return;
  const auto k = random_rows(kBlock, 4), v = random_rows(kBlock, 5);
  const size_t key_bytes = kv_key_block_bytes(bits, kHeadDim, kBlock),
               row_bytes = kv_value_row_bytes(bits, kHeadDim, kGroup);
  std::vector<uint8_t> block(key_bytes + kBlock * row_bytes);
  for (auto _ : state) {
    kv_quantize_key_block(isa, k.data(), kBlock, kHeadDim, bits, block.data());
    for (uint32_t t = 0; t < kBlock; ++t)
      kv_quantize_value_row(isa, v.data() + t * kHeadDim, kHeadDim, kGroup, bits,
                            block.data() + key_bytes + t * row_bytes);
    benchmark::DoNotOptimize(block.data());
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(kBlock) * state.iterations(), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(to_string(isa)) + " q" + std::to_string(bits));
}
BENCHMARK(BM_QuantizeBlock)->Args({4, 0})->Args({4, 1})->Args({4, 2})->Args({4, 3})->Args({2, 2});

}  // namespace
}  // namespace tern
