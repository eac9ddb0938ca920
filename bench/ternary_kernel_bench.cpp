// Ternary kernels on the bitnet-b1.58-2B-4T layer shapes, next to a plain memory-read
// loop, so "weight GB/s" can be read against what this machine's memory delivers.
//
//   tern-kernel-bench --benchmark_filter='MemRead|Gemv/.*/avx512' --benchmark_min_time=0.3
//
// Decode streams weights from DRAM in a real model (hundreds of MB per token), so the
// GEMV benchmarks rotate over enough copies of the matrix to overflow the last-level
// cache (kStreamBytes); the "hot" variant reuses one copy to show the compute ceiling.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include <xnnpack.h>

#include "kernels/dense_matmul.h"
#include "kernels/ternary_base3.h"
#include "kernels/ternary_matmul.h"
#include "kernels/ternary_ukernels.h"

namespace tern {
namespace {

constexpr size_t kStreamBytes = size_t{256} << 20;

struct Shape {
  size_t rows, cols;  // out x in
};
const Shape kShapes[] = {{2560, 2560}, {640, 2560}, {6912, 2560}, {2560, 6912}};
const auto& kIsas = kIsaLevels;

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
  state.counters["weight_B/s"] = benchmark::Counter(iters * static_cast<double>(matrix_bytes),
                                                    benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.counters["OP/s"] = benchmark::Counter(iters * 2.0 * static_cast<double>(s.rows * s.cols * tokens),
                                              benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.counters["tokens/s"] = benchmark::Counter(iters * static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(to_string(isa)) + (streamed ? " streamed" : " hot") + " " + std::to_string(s.cols) + "->" +
                 std::to_string(s.rows) + " x" + std::to_string(tokens) + " t" + std::to_string(threads));
}

template <long Threads>
void TernaryArgs(benchmark::internal::Benchmark* b) {
  for (long isa = 0; isa < 6; ++isa) {
    if (!isa_supported(kIsas[isa], cpu_features())) continue;
    for (long shape = 0; shape < 4; ++shape) {
      b->Args({shape, 1, Threads, isa, 1});    // decode, weights from DRAM
      b->Args({shape, 1, Threads, isa, 0});    // decode, weights cache-resident
      b->Args({shape, 5, Threads, isa, 1});    // verifying 4 drafts, weights from DRAM
      b->Args({shape, 5, Threads, isa, 0});    // the same from cache: the pass's arithmetic alone
      b->Args({shape, 128, Threads, isa, 0});  // prefill
    }
  }
}
// One thread is timed by its CPU time (the machine may be shared); two threads by wall time.
BENCHMARK(BM_Ternary)
    ->Apply(TernaryArgs<1>)
    ->ArgNames({"shape", "tokens", "threads", "isa", "streamed"})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Ternary)
    ->Apply(TernaryArgs<2>)
    ->ArgNames({"shape", "tokens", "threads", "isa", "streamed"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// A plain read loop over kStreamBytes: the bandwidth a weight stream can hope for.
// Both ternary layouts' one-token block kernels alone (no activation quantization or
// scaling) over a whole 2B-4T matrix, weights streamed from DRAM: t2i16 (2 bits) against
// base-3 t3i16 (1.6 bits) at the same ISA. args: shape, layout (0 t2i16, 1 t3i16).
void BM_TernaryLayout(benchmark::State& state) {
  const Shape s = kShapes[state.range(0)];
  const bool base3 = state.range(1) != 0;
#if defined(__x86_64__)
  const Isa isa = Isa::Avx2;
  const TernaryBlockKernelInfo& k = base3 ? ternary_block_t3i16__avx2 : ternary_block_t2i16__avx2;
#elif defined(__aarch64__)
  const Isa isa = Isa::Neon;
  const TernaryBlockKernelInfo& k = base3 ? ternary_block_t3i16__neon : ternary_block_t2i16__neon;
#else
  const Isa isa = Isa::Scalar;
  const TernaryBlockKernelInfo& k = base3 ? ternary_block_t3i16__scalar : ternary_block_t2i16__scalar;
#endif
  if (!isa_supported(isa, cpu_features())) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  const size_t matrix_bytes =
      base3 ? t3i_packed_size(s.rows, s.cols) : ternary_packed_size(TernaryLayout::T2Interleaved16, s.rows, s.cols);
  const size_t block_bytes = matrix_bytes / ((s.rows + 15) / 16);
  const size_t copies = (kStreamBytes + matrix_bytes - 1) / matrix_bytes;
  AlignedBytes data = aligned_bytes(copies * matrix_bytes);
  std::mt19937 rng(7);
  for (size_t i = 0; i < copies * matrix_bytes; ++i) data[i] = static_cast<uint8_t>(rng() % 243 * 256 / 243);
  std::vector<int8_t> q(s.cols);
  for (auto& v : q) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  std::vector<int32_t> out(16);
  size_t c = 0;
  for (auto _ : state) {
    const uint8_t* m = data.get() + c * matrix_bytes;
    if (++c == copies) c = 0;
    for (size_t b = 0; b < s.rows / 16; ++b) k.fn(m + b * block_bytes, s.cols, q.data(), s.cols, 1, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["weight_B/s"] = benchmark::Counter(iters * static_cast<double>(matrix_bytes),
                                                    benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.counters["weights/s"] = benchmark::Counter(iters * static_cast<double>(s.rows * s.cols),
                                                   benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.SetLabel(std::string(base3 ? "t3i16 " : "t2i16 ") + to_string(isa) + " " + std::to_string(s.cols) + "->" +
                 std::to_string(s.rows));
}
BENCHMARK(BM_TernaryLayout)
    ->ArgNames({"shape", "base3"})
    ->ArgsProduct({{0, 1, 2, 3}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

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

// The tied lm_head of 2B-4T: 128256 x 2560, one token. Ours through dense_gemv_f32_isa
// or, for the int8-activation rows, dense_gemv_i8_isa (arg 0: 0 = f32, 1 = f16, 2 = q8
// group 64, 3 = q8 int8 activations, 4 = q4 int8 activations; arg 1: 1 = selected ISA,
// 0 = scalar).
constexpr size_t kVocab = 128256, kDim = 2560;

// A rows x cols dense matrix of `type` with deterministic contents (finite f32 and f16
// values) and scales of 0.01, owning its storage.
struct SyntheticDense {
  SyntheticDense(DenseType type, size_t rows, size_t cols, uint32_t group) {
    m.type = type;
    m.rows = rows;
    m.cols = cols;
    m.group = group;
    m.size_bytes = dense_data_size(type, rows, cols);
    data = aligned_bytes(m.size_bytes);
    for (size_t i = 0; i < m.size_bytes; ++i) data[i] = static_cast<uint8_t>((i * 131) >> 3);
    if (type == DenseType::F32) {
      float* f = reinterpret_cast<float*>(data.get());
      for (size_t i = 0; i < rows * cols; ++i) f[i] = static_cast<float>(i % 97) * 0.01f;
    } else if (type == DenseType::F16) {
      uint16_t* h = reinterpret_cast<uint16_t*>(data.get());
      for (size_t i = 0; i < rows * cols; ++i) h[i] = static_cast<uint16_t>(0x2000 + i % 0x1000);
    }
    scales.assign(dense_scale_count(type, rows, cols, group), 0.01f);
    m.data = data.get();
    m.scales = scales.empty() ? nullptr : scales.data();
  }
  DenseMatrix m;
  AlignedBytes data;
  std::vector<float> scales;
};

std::vector<float> lm_head_activation() {
  std::vector<float> x(kDim);
  for (size_t i = 0; i < kDim; ++i) x[i] = static_cast<float>((i * 7919) % 255) / 127.0f - 1.0f;
  return x;
}

void BM_LmHead(benchmark::State& state) {
  const DenseType types[] = {DenseType::F32, DenseType::F16, DenseType::Q8, DenseType::Q8, DenseType::Q4};
  const DenseType type = types[state.range(0)];
  const bool int8_activations = state.range(0) >= 3;
  const Isa isa = state.range(1) != 0 ? ternary_active_isa() : Isa::Scalar;
  const SyntheticDense dense(type, kVocab, kDim, type == DenseType::Q8 || type == DenseType::Q4 ? 64 : 0);
  const DenseMatrix& m = dense.m;
  const std::vector<float> x = lm_head_activation();
  std::vector<float> y(kVocab);
  ThreadPool* pool = pool_for(static_cast<size_t>(state.range(2)));
  for (auto _ : state) {
    const Error e = int8_activations ? dense_gemv_i8_isa(isa, m, x.data(), y.data(), pool)
                                     : dense_gemv_f32_isa(isa, m, x.data(), y.data(), pool);
    if (e != Error::Ok) {
      state.SkipWithError("kernel failed");
      break;
    }
    benchmark::ClobberMemory();
  }
  state.counters["weight_B/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * m.size_bytes,
                                                    benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.SetLabel(std::string(to_string(type)) + (int8_activations ? " int8-act " : " ") + to_string(isa));
}
BENCHMARK(BM_LmHead)
    ->ArgNames({"type", "simd", "threads"})
    ->Args({0, 1, 1})
    ->Args({1, 1, 1})
    ->Args({2, 1, 1})
    ->Args({3, 1, 1})
    ->Args({4, 1, 1})
    ->Args({2, 0, 1})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LmHead)
    ->ArgNames({"type", "simd", "threads"})
    ->Args({1, 1, 2})
    ->Args({2, 1, 2})
    ->Args({3, 1, 2})
    ->Args({4, 1, 2})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The q4 lm_head for several tokens at once (a verification pass, sessions decoded together):
// one read of the matrix, each weight group unpacked once for up to four tokens. Time per call;
// compare with tokens:1 to see what each further token costs.
void BM_LmHeadTokens(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const SyntheticDense dense(DenseType::Q4, kVocab, kDim, 64);
  const std::vector<float> one = lm_head_activation();
  std::vector<float> x(n * kDim);
  for (size_t t = 0; t < n; ++t) std::copy(one.begin(), one.end(), x.begin() + t * kDim);
  std::vector<std::vector<float>> y(n, std::vector<float>(kVocab));
  std::vector<float*> out(n);
  for (size_t t = 0; t < n; ++t) out[t] = y[t].data();
  std::vector<uint8_t> work(dense_gemv_tokens_work_bytes(kDim, n));
  ThreadPool* pool = pool_for(static_cast<size_t>(state.range(1)));
  for (auto _ : state) {
    if (dense_gemv_i8_tokens_isa(ternary_active_isa(), dense.m, x.data(), kDim, n, out.data(), work.data(), pool) !=
        Error::Ok) {
      state.SkipWithError("kernel failed");
      break;
    }
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string("q4 x") + std::to_string(n) + " " + to_string(ternary_active_isa()));
}
BENCHMARK(BM_LmHeadTokens)
    ->ArgNames({"tokens", "threads"})
    ->Args({1, 1})
    ->Args({2, 1})
    ->Args({4, 1})
    ->Args({5, 1})
    ->Args({8, 1})
    ->Unit(benchmark::kMillisecond);

// XNNPACK fully-connected on the same shape: f32 (f32 weights) and qs8 (int8 weights,
// one scale per tensor, int8 input and int8 output). XNNPACK packs its own copy of the
// weights at create time, so this is after that copy.
void BM_XnnLmHead(benchmark::State& state) {
  const bool qs8 = state.range(0) != 0;
  if (xnn_initialize(nullptr) != xnn_status_success) {
    state.SkipWithError("xnn_initialize failed");
    return;
  }
  xnn_operator_t op = nullptr;
  std::vector<float> wf;
  std::vector<int8_t> wq;
  if (qs8) {
    wq.resize(kVocab * kDim);
    for (size_t i = 0; i < wq.size(); ++i) wq[i] = static_cast<int8_t>((i * 131) >> 3);
    if (xnn_create_fully_connected_nc_qs8(kDim, kVocab, kDim, kVocab, 0, 0.02f, 0.01f, wq.data(), nullptr, 0, 1.0f,
                                          -127, 127, 0, &op) != xnn_status_success) {
      state.SkipWithError("create qs8 failed");
      return;
    }
  } else {
    wf.resize(kVocab * kDim);
    for (size_t i = 0; i < wf.size(); ++i) wf[i] = static_cast<float>(i % 97) * 0.01f;
    if (xnn_create_fully_connected_nc_f32(kDim, kVocab, kDim, kVocab, wf.data(), nullptr, -INFINITY, INFINITY, 0,
                                          &op) != xnn_status_success) {
      state.SkipWithError("create f32 failed");
      return;
    }
  }
  // Only the packed copy is used from here on.
  std::vector<float>().swap(wf);
  std::vector<int8_t>().swap(wq);
  const std::vector<float> x = lm_head_activation();
  std::vector<int8_t> xq(kDim);
  for (size_t i = 0; i < kDim; ++i) xq[i] = static_cast<int8_t>(x[i] * 100.0f);
  std::vector<float> y(kVocab);
  std::vector<int8_t> yq(kVocab);
  ThreadPool* pool = pool_for(static_cast<size_t>(state.range(1)));
  const pthreadpool_t threads = pool == nullptr ? nullptr : pool->handle();
  const xnn_status setup = qs8 ? xnn_setup_fully_connected_nc_qs8(op, 1, xq.data(), yq.data(), threads)
                               : xnn_setup_fully_connected_nc_f32(op, 1, x.data(), y.data(), threads);
  if (setup != xnn_status_success) {
    state.SkipWithError("setup failed");
    xnn_delete_operator(op);
    return;
  }
  for (auto _ : state) {
    xnn_run_operator(op, threads);
    benchmark::ClobberMemory();
  }
  xnn_delete_operator(op);
  const double bytes = static_cast<double>(kVocab * kDim) * (qs8 ? 1 : 4);
  state.counters["weight_B/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * bytes,
                                                    benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.SetLabel(qs8 ? "xnnpack qs8 (int8 out)" : "xnnpack f32");
}
BENCHMARK(BM_XnnLmHead)->ArgNames({"qs8", "threads"})->Args({0, 1})->Args({1, 1})->Unit(benchmark::kMillisecond);

// Logits for many positions at once (what prefill, tern-eval and calibration would want if
// they scored every position): a quarter of the 2B-4T lm_head, 32064 x 2560, for M
// positions. Ours has no batched dense GEMM, so it is M GEMVs (impl 0: f32, 1: f16 weights,
// 2: q4 int8 activations); XNNPACK's f32 fully-connected (impl 3) runs one GEMM over its own
// packed f32 copy. Per position, to compare across M.
void BM_LmHeadPositions(benchmark::State& state) {
  const int impl = static_cast<int>(state.range(0));
  const size_t positions = static_cast<size_t>(state.range(1));
  constexpr size_t kRows = kVocab / 4;
  std::vector<float> x(positions * kDim), y(positions * kRows);
  const std::vector<float> one = lm_head_activation();
  for (size_t p = 0; p < positions; ++p)
    for (size_t i = 0; i < kDim; ++i) x[p * kDim + i] = one[(i + 17 * p) % kDim];
  std::vector<float> wf;
  if (impl == 3) {
    if (xnn_initialize(nullptr) != xnn_status_success) {
      state.SkipWithError("xnn_initialize failed");
      return;
    }
    wf.resize(kRows * kDim);
    for (size_t i = 0; i < wf.size(); ++i) wf[i] = static_cast<float>(i % 97) * 0.01f;
    xnn_operator_t op = nullptr;
    if (xnn_create_fully_connected_nc_f32(kDim, kRows, kDim, kRows, wf.data(), nullptr, -INFINITY, INFINITY, 0, &op) !=
            xnn_status_success ||
        xnn_setup_fully_connected_nc_f32(op, positions, x.data(), y.data(), nullptr) != xnn_status_success) {
      state.SkipWithError("xnnpack setup failed");
      return;
    }
    std::vector<float>().swap(wf);
    for (auto _ : state) {
      xnn_run_operator(op, nullptr);
      benchmark::ClobberMemory();
    }
    xnn_delete_operator(op);
    state.SetLabel("xnnpack f32 GEMM");
  } else {
    const DenseType type = impl == 0 ? DenseType::F32 : impl == 1 ? DenseType::F16 : DenseType::Q4;
    const SyntheticDense dense(type, kRows, kDim, type == DenseType::Q4 ? 64 : 0);
    const DenseMatrix& m = dense.m;
    for (auto _ : state) {
      for (size_t p = 0; p < positions; ++p) {
        if (type == DenseType::Q4) {
          dense_gemv_i8(m, x.data() + p * kDim, y.data() + p * kRows, nullptr);
        } else {
          dense_gemv_f32(m, x.data() + p * kDim, y.data() + p * kRows, nullptr);
        }
      }
      benchmark::ClobberMemory();
    }
    state.SetLabel(std::string("ours ") + to_string(type) + " GEMV x M");
  }
  state.counters["per_position"] = benchmark::Counter(static_cast<double>(state.iterations()) * positions,
                                                      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_LmHeadPositions)
    ->ArgNames({"impl", "positions"})
    ->ArgsProduct({{0, 1, 2, 3}, {1, 8, 64}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tern
