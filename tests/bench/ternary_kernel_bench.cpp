// Ternary kernels on the bitnet-b1.58-2B-4T layer shapes, next to a plain memory-read
// loop, so "weight GB/s" can be read against what this machine's memory delivers.
//
//   tern-kernel-bench --benchmark_filter='MemRead|Gemv/.*/avx512' --benchmark_min_time=0.3
//
// Decode streams weights from DRAM in a real model (hundreds of MB per token), so the
// GEMV benchmarks rotate over enough copies of the matrix to overflow the last-level
// cache (kStreamBytes); the "hot" variant reuses one copy to show the compute ceiling.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "kernels/ternary_matmul.h"

namespace tern {
namespace {

constexpr size_t kStreamBytes = size_t{256} << 20;

struct Shape {
  size_t rows, cols;  // out x in
};
const Shape kShapes[] = {{2560, 2560}, {640, 2560}, {6912, 2560}, {2560, 6912}};
const Isa kIsas[] = {Isa::Scalar, Isa::Avx2, Isa::Avx512Vnni, Isa::Neon, Isa::NeonDot, Isa::NeonI8mm};

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<uint8_t[], AlignedFree>;
AlignedBytes aligned_bytes(size_t n) {
  return AlignedBytes(static_cast<uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64)));
}

struct Weights {
  AlignedBytes data;
  size_t matrix_bytes = 0;
  size_t copies = 0;
};

// `copies` packed random matrices back to back (each 64-byte aligned, as in a bundle).
Weights make_weights(const Shape& s, size_t copies) {
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> code(-1, 1);
  std::vector<int8_t> codes(s.rows * s.cols);
  for (auto& c : codes) c = static_cast<int8_t>(code(rng));
  Weights w;
  w.matrix_bytes = ternary_packed_size(TernaryLayout::T2Interleaved16, s.rows, s.cols);
  w.copies = copies;
  w.data = aligned_bytes(w.matrix_bytes * copies);
  if (ternary_pack(TernaryLayout::T2Interleaved16, codes.data(), s.rows, s.cols, w.data.get(), w.matrix_bytes) !=
      Error::Ok) {
    std::abort();
  }
  for (size_t i = 1; i < copies; ++i) std::memcpy(w.data.get() + i * w.matrix_bytes, w.data.get(), w.matrix_bytes);
  return w;
}

struct Activations {
  std::vector<int8_t> q;
  std::vector<float> scales;
  std::vector<int32_t> sums;
  QuantizedActivations view;
};

Activations make_activations(size_t tokens, size_t cols) {
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Activations a;
  a.q.resize(tokens * cols);
  a.scales.resize(tokens);
  a.sums.resize(tokens);
  std::vector<float> x(cols);
  for (size_t t = 0; t < tokens; ++t) {
    for (auto& v : x) v = dist(rng);
    quantize_row_absmax_int8(x.data(), cols, a.q.data() + t * cols, &a.scales[t], &a.sums[t]);
  }
  a.view = {a.q.data(), a.scales.data(), a.sums.data(), tokens, cols, cols};
  return a;
}

ThreadPool* pool_for(size_t threads) {
  static ThreadPool pools[3];
  static bool made[3] = {false, false, false};
  if (threads <= 1) return nullptr;
  if (!made[threads]) {
    auto p = ThreadPool::create(threads);
    if (!p.ok()) std::abort();
    pools[threads] = std::move(*p);
    made[threads] = true;
  }
  return &pools[threads];
}

// args: shape index, tokens, threads, isa, streamed (1) or hot (0)
void BM_Ternary(benchmark::State& state) {
  const Shape s = kShapes[state.range(0)];
  const size_t tokens = static_cast<size_t>(state.range(1));
  const size_t threads = static_cast<size_t>(state.range(2));
  const Isa isa = kIsas[state.range(3)];
  const bool streamed = state.range(4) != 0;
  if (!isa_supported(isa, cpu_features())) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  const size_t matrix_bytes = ternary_packed_size(TernaryLayout::T2Interleaved16, s.rows, s.cols);
  const size_t copies = streamed ? (kStreamBytes + matrix_bytes - 1) / matrix_bytes : 1;
  const Weights w = make_weights(s, copies);
  const Activations a = make_activations(tokens, s.cols);
  std::vector<float> y(tokens * s.rows);
  TernaryMatrix m;
  m.layout = TernaryLayout::T2Interleaved16;
  m.size_bytes = w.matrix_bytes;
  m.rows = s.rows;
  m.cols = s.cols;
  m.scale = 0.5f;
  ThreadPool* pool = pool_for(threads);
  size_t i = 0;
  for (auto _ : state) {
    m.data = w.data.get() + i * w.matrix_bytes;
    if (++i == w.copies) i = 0;
    if (ternary_matmul_isa(isa, m, a.view, y.data(), s.rows, pool) != Error::Ok) {
      state.SkipWithError("kernel failed");
      break;
    }
    benchmark::ClobberMemory();
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["weight_B/s"] =
      benchmark::Counter(iters * static_cast<double>(matrix_bytes), benchmark::Counter::kIsRate,
                         benchmark::Counter::kIs1000);
  state.counters["OP/s"] = benchmark::Counter(iters * 2.0 * static_cast<double>(s.rows * s.cols * tokens),
                                              benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.counters["tokens/s"] = benchmark::Counter(iters * static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(to_string(isa)) + (streamed ? " streamed" : " hot") + " " + std::to_string(s.cols) +
                 "->" + std::to_string(s.rows) + " x" + std::to_string(tokens) + " t" + std::to_string(threads));
}

template <long Threads>
void TernaryArgs(benchmark::internal::Benchmark* b) {
  for (long isa = 0; isa < 6; ++isa) {
    if (!isa_supported(kIsas[isa], cpu_features())) continue;
    for (long shape = 0; shape < 4; ++shape) {
      b->Args({shape, 1, Threads, isa, 1});    // decode, weights from DRAM
      b->Args({shape, 1, Threads, isa, 0});    // decode, weights cache-resident
      b->Args({shape, 128, Threads, isa, 0});  // prefill
    }
  }
}
// One thread is timed by its CPU time (the machine may be shared); two threads by wall time.
BENCHMARK(BM_Ternary)->Apply(TernaryArgs<1>)->ArgNames({"shape", "tokens", "threads", "isa", "streamed"})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Ternary)->Apply(TernaryArgs<2>)->ArgNames({"shape", "tokens", "threads", "isa", "streamed"})
    ->UseRealTime()->Unit(benchmark::kMicrosecond);

// A plain read loop over kStreamBytes: the bandwidth a weight stream can hope for.
void BM_MemRead(benchmark::State& state) {
  const size_t threads = static_cast<size_t>(state.range(0));
  const size_t words = kStreamBytes / 8;
  static AlignedBytes buffer;
  if (!buffer) {
    buffer = aligned_bytes(kStreamBytes);
    std::memset(buffer.get(), 1, kStreamBytes);
  }
  const uint64_t* p = reinterpret_cast<const uint64_t*>(buffer.get());
  ThreadPool* pool = pool_for(threads);
  uint64_t partial[2] = {0, 0};
  auto read_half = [&](size_t part) {
    const size_t begin = words / threads * part, end = part + 1 == threads ? words : words / threads * (part + 1);
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (size_t k = begin; k + 4 <= end; k += 4) {
      a0 += p[k];
      a1 += p[k + 1];
      a2 += p[k + 2];
      a3 += p[k + 3];
    }
    partial[part] = a0 + a1 + a2 + a3;
  };
  for (auto _ : state) {
    if (pool == nullptr) {
      read_half(0);
    } else {
      pool->parallel_for(threads, read_half);
    }
    benchmark::DoNotOptimize(partial);
  }
  state.counters["read_B/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * kStreamBytes,
                                                  benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_MemRead)->Arg(1)->ArgName("threads")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MemRead)->Arg(2)->ArgName("threads")->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tern
