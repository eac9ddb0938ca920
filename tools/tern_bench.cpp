// tern-bench BUNDLE: prompt processing (pp128: one 128-token prefill) and text generation
// (tg64: 64 single-token decodes) in tokens/s at 1 and 2 threads, like llama-bench.
// Tokens are fixed pseudo-random ids, so no tokenizer or sampling cost is included.
// Then the bounds: the machine's plain read bandwidth (one sum over 512 MiB per thread count),
// the bytes a decoded token reads (every weight once, the KV rows at its position) and decode
// as a fraction of bytes/bandwidth; and the int8 peak of the ternary kernel in use (a GEMM on
// a matrix that stays in cache) with prefill as a fraction of it; and the share of the weights
// the kernel maps with large pages (--weights-pages, default auto: tern_model_params.weights_pages).
// --verify 2,4,8: the cost of one speculative verification pass of k drafts (k + 1 tokens
// and their logits in one batch) against one decode step, at position pp (medians).
// An embedding bundle gets the embedding benchmark instead: --texts texts of --text-tokens
// tokens per call (default 32 x 128), texts/s and tokens/s.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kernels/ternary_matmul.h"
#include "platform/clock.h"
#include "runtime/engine/model.h"
#include "runtime/engine/session.h"
#include "runtime/model/bundle.h"
#include "tools/common/decode_work.h"
#include "tools/common/model_options.h"

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

// Bytes per second one sum over `bytes` of memory reads with `threads` threads, best of 3.
double read_bandwidth(unsigned threads) {
  const size_t bytes = size_t{512} << 20, words = bytes / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> buf(new uint64_t[words]);
  for (size_t i = 0; i < words; ++i) buf[i] = i * 0x9E3779B97F4A7C15ull;
  double best = 0;
  volatile uint64_t sink = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<uint64_t> sums(threads, 0);
    std::vector<std::thread> pool;
    const uint64_t t0 = tern::monotonic_ns();
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const size_t begin = words * t / threads, end = words * (t + 1) / threads;
        uint64_t a = 0, b = 0, c = 0, d = 0;
        for (size_t i = begin; i + 4 <= end; i += 4) a += buf[i], b += buf[i + 1], c += buf[i + 2], d += buf[i + 3];
        sums[t] = a + b + c + d;
      });
    }
    for (auto& th : pool) th.join();
    const double s = tern::seconds_between(t0, tern::monotonic_ns());
    for (uint64_t v : sums) sink = sink + v;
    best = std::max(best, static_cast<double>(bytes) / s);
  }
  return best;
}

// Ternary weight-MACs per second of the kernel in use on the model's largest matrix shape
// cut to 256 rows (stays in cache), 64 tokens, best of 5: what prefill could reach.
double int8_peak_macs(const tern::Model& m, unsigned threads) {
  const tern::LayerWeights& lw = m.weights().layers[0];
  tern::TernaryMatrix w = lw.w_up;
  const size_t row_bytes = w.size_bytes / w.rows;
  w.rows = 256;
  w.size_bytes = row_bytes * w.rows;
  const size_t tokens = 64;
  std::vector<int8_t> q(tokens * w.cols, 1);
  std::vector<float> scales(tokens, 1.0f), y(tokens * w.rows);
  std::vector<int32_t> sums(tokens, static_cast<int32_t>(w.cols));
  tern::QuantizedActivations x{q.data(), scales.data(), sums.data(), tokens, w.cols, w.cols};
  auto created = tern::ThreadPool::create(threads);
  if (!created.ok()) return 0;
  tern::ThreadPool pool = std::move(created).value();
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const uint64_t t0 = tern::monotonic_ns();
    for (int i = 0; i < 20; ++i) tern::ternary_matmul(w, x, y.data(), w.rows, pool.num_threads() > 1 ? &pool : nullptr);
    const double s = tern::seconds_between(t0, tern::monotonic_ns());
    best = std::max(best, 20.0 * static_cast<double>(w.rows) * w.cols * tokens / s);
  }
  return best;
}

// Embedding bundles: `texts` texts of `text_tokens` tokens each (random letters, one token
// per byte with the synthetic byte tokenizer; the model's end token included) per call of
// Session::embed, the texts sharing forward passes of `batch` tokens. Texts/s and tokens/s,
// mean ± stddev over the repetitions after one warm-up.
int embedding_bench(const std::string& bundle, const std::vector<unsigned>& threads, unsigned texts,
                    unsigned text_tokens, unsigned batch, unsigned reps, const std::string& kv) {
  std::printf("| model | threads | test | texts/s | tokens/s |\n| --- | ---: | --- | ---: | ---: |\n");
  std::fflush(stdout);
  const std::string name = bundle.substr(bundle.find_last_of('/') + 1);
  for (unsigned t : threads) {
    tern::ModelParams params;
    params.threads = t;
    params.context_tokens = std::max(text_tokens, batch);
    params.batch_tokens = batch;
    params.kv_mode = kv.c_str();
    auto model = tern::Model::load(bundle.c_str(), params);
    if (!model.ok()) {
      std::fprintf(stderr, "tern-bench: %s\n", tern::last_error_message());
      return 1;
    }
    const tern::Tokenizer* tok = (*model)->tokenizer();
    const bool end_token = (*model)->config().embedding_append_eos;
    const bool bos = tok != nullptr && tok->add_bos_default() && tok->bos_id() >= 0;
    // Letters, so that every byte is one token of the synthetic byte tokenizer.
    const unsigned letters = text_tokens - (end_token ? 1 : 0) - (bos ? 1 : 0);
    std::vector<std::string> strings(texts);
    uint32_t state = 12345;
    for (std::string& s : strings) {
      for (unsigned i = 0; i < letters; ++i) {
        state = state * 1664525u + 1013904223u;
        s += static_cast<char>('a' + (state >> 8) % 26);
      }
    }
    std::vector<const char*> ptrs;
    std::vector<size_t> sizes;
    for (const std::string& s : strings) ptrs.push_back(s.data()), sizes.push_back(s.size());
    auto session = (*model)->create_session(tern::SamplerParams{});
    if (!session.ok()) {
      std::fprintf(stderr, "tern-bench: %s\n", tern::last_error_message());
      return 1;
    }
    const uint32_t dims = (*model)->config().hidden;
    std::vector<float> out(static_cast<size_t>(texts) * dims);
    std::vector<double> text_rates, token_rates;
    uint64_t tokens = 0;
    for (unsigned r = 0; r <= reps; ++r) {  // r == 0 warms up
      tern::EmbedStats st;
      if ((*session)->embed(ptrs.data(), sizes.data(), texts, tern::EmbedOptions{}, out.data(),
                            out.size() * sizeof(float), nullptr, &st) != tern::Error::Ok) {
        std::fprintf(stderr, "tern-bench: embed: %s\n", tern::last_error_message());
        return 1;
      }
      tokens = st.tokens;
      if (r == 0) continue;
      text_rates.push_back(st.texts / st.seconds);
      token_rates.push_back(static_cast<double>(st.tokens) / st.seconds);
    }
    const Sample a = summarize(text_rates), b = summarize(token_rates);
    double load[3] = {0, 0, 0};
    getloadavg(load, 3);
    std::printf("| %s | %u | embed %u x %u tokens (%llu), batch %u | %.2f ± %.2f | %.1f ± %.1f |\n", name.c_str(), t,
                texts, text_tokens, static_cast<unsigned long long>(tokens / texts * texts), batch, a.mean, a.stddev,
                b.mean, b.stddev);
    std::fprintf(stderr, "load average %.2f after %u thread(s)\n", load[0], t);
    std::fflush(stdout);
    (*model)->destroy_session(*session);
  }
  return 0;
}

// The command line.
struct BenchOptions {
  std::string bundle;
  unsigned pp = 128, tg = 64, reps = 2;
  std::vector<unsigned> threads = {1, 2};
  std::string kv = "f32";
  std::string weights_pages = "auto";
  std::vector<unsigned> verify;
  unsigned texts = 32, text_tokens = 128, embed_batch = 256;
};

void add_bench_options(CLI::App& app, BenchOptions* o) {
  app.add_option("BUNDLE", o->bundle, ".tern bundle")->required();
  app.add_option("-p,--pp", o->pp, "prompt tokens per prefill")->check(CLI::PositiveNumber);
  app.add_option("-n,--tg", o->tg, "generated tokens per run")->check(CLI::PositiveNumber);
  app.add_option("-r,--reps", o->reps, "repetitions (after one warm-up)")->check(CLI::PositiveNumber);
  app.add_option("-t,--threads", o->threads, "thread counts")->expected(1, -1);
  tern::cli::add_kv_option(app, &o->kv);
  tern::cli::add_weights_pages_option(app, &o->weights_pages);
  app.add_option("--verify", o->verify, "draft counts k: time a verification pass of k drafts against a decode step")
      ->check(CLI::Range(1u, tern::kMaxDraftTokens))
      ->delimiter(',');
  app.add_option("--texts", o->texts, "embedding bundles: texts per embed call")->check(CLI::PositiveNumber);
  app.add_option("--text-tokens", o->text_tokens, "embedding bundles: tokens per text")
      ->check(CLI::Range(4u, 1u << 20));
  app.add_option("--embed-batch", o->embed_batch, "embedding bundles: tokens per forward pass")
      ->check(CLI::PositiveNumber);
}

// --verify: the decode step and verification rows; 0, or the exit code.
int print_verify_rows(tern::Session& s, const BenchOptions& o, const std::vector<int32_t>& tokens, unsigned max_draft,
                      const std::string& name, unsigned t) {
  const unsigned pp = o.pp;
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
      const tern::Error e =
          k == 0 ? s.decode(tokens[pp]) : s.verify_drafts(tokens[pp], tokens.data() + pp + 1, k).error();
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
  for (unsigned k : o.verify) {
    const double v = timed(k);
    std::printf("| %s | %u | verify %u drafts | %.2f ms (%.2fx) |\n", name.c_str(), t, k, v, v / decode_ms);
  }
  return 0;
}

// The bounds rows beside the measured prefill (`a`) and decode (`b`) rates; 0, or the exit code.
int print_bound_rows(const tern::Model& m, const BenchOptions& o, const std::string& name, unsigned t, const Sample& a,
                     const Sample& b, double load_seconds) {
  const unsigned pp = o.pp, tg = o.tg;
  // The bounds. Decode at the middle of the generated run reads the weights once and the
  // KV rows of about pp + tg/2 positions.
  const tern::TernaryLayout layout = m.weights().layers[0].wq.layout;
  auto work = tern::cli::bundle_decode_work(*m.bundle(), layout);
  if (!work.ok()) {
    std::fprintf(stderr, "tern-bench: %s\n", tern::last_error_message());
    return 1;
  }
  const double bw = read_bandwidth(t);
  const double bytes = work->ternary_bytes + work->other_bytes + m.plan().kv_bytes_per_token * (pp + tg / 2.0);
  const double peak = int8_peak_macs(m, t);
  const double macs = work->ternary_weights;  // ternary weight-MACs per token
  std::printf("| %s | %u | ternary layout (block kernel) | %s (%s) |\n", name.c_str(), t, tern::to_string(layout),
              tern::to_string(tern::ternary_active_isa(layout)));
  std::printf("| %s | %u | read bandwidth | %.2f GB/s |\n", name.c_str(), t, bw / 1e9);
  std::printf("| %s | %u | bytes per decoded token | %.1f MB (bound %.2f tok/s) |\n", name.c_str(), t, bytes / 1e6,
              bw / bytes);
  std::printf("| %s | %u | decode / bandwidth bound | %.0f %% |\n", name.c_str(), t, 100.0 * b.mean * bytes / bw);
  // Decode reads every weight once per token, and with 4 KB pages each 4 KB costs a TLB miss:
  // a bundle left in the page cache by the program that wrote it (small folios) moved 2B-4T
  // tg64 from 32-33 to 21-26 tok/s on the Zen 5 VM with --weights-pages map.
  const tern::WeightPagesReport pages = m.weights_pages();
  if (pages.usage.known && pages.large_page_bytes > 0) {
    std::printf("| %s | %u | weights in %zu MB pages | %.0f %% (%s %s: %s, load %.2f s) |\n", name.c_str(), t,
                pages.large_page_bytes >> 20, 100.0 * pages.usage.large_bytes / static_cast<double>(pages.bytes),
                pages.anonymous ? "anonymous copy," : "mapped,", tern::to_string(pages.mode),
                tern::to_string(pages.load), load_seconds);
  }
  std::printf("| %s | %u | int8 peak (ternary kernel in cache) | %.1f G weight-MACs/s (bound %.1f tok/s) |\n",
              name.c_str(), t, peak / 1e9, peak / macs);
  std::printf("| %s | %u | prefill / int8 peak | %.0f %% |\n", name.c_str(), t, 100.0 * a.mean * macs / peak);
  return 0;
}

// The table rows at `t` threads: pp and tg rates, --verify, the bounds. `tokens` gets fresh
// pseudo-random ids from `state` for this model's vocabulary. 0, or the exit code.
int bench_threads(const BenchOptions& o, unsigned t, unsigned max_draft, std::vector<int32_t>& tokens,
                  uint32_t& state) {
  const unsigned pp = o.pp, tg = o.tg;
  tern::ModelParams params;
  params.threads = t;
  params.context_tokens = pp + tg;
  params.batch_tokens = pp;
  params.kv_mode = o.kv.c_str();
  params.draft_tokens = max_draft;
  params.weights_pages = o.weights_pages.c_str();
  if (max_draft + 1 > params.batch_tokens) params.batch_tokens = max_draft + 1;
  const uint64_t load_start = tern::monotonic_ns();
  auto model = tern::Model::load(o.bundle.c_str(), params);
  const double load_seconds = tern::seconds_between(load_start, tern::monotonic_ns());
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
  for (unsigned r = 0; r <= o.reps; ++r) {  // r == 0 warms up (pages in the weights)
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
  const std::string name = o.bundle.substr(o.bundle.find_last_of('/') + 1);
  const Sample a = summarize(pp_rates), b = summarize(tg_rates);
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  std::printf("| %s | %u | pp%u | %.2f ± %.2f |\n", name.c_str(), t, pp, a.mean, a.stddev);
  std::printf("| %s | %u | tg%u | %.2f ± %.2f |\n", name.c_str(), t, tg, b.mean, b.stddev);
  if (!o.verify.empty()) {
    if (const int code = print_verify_rows(s, o, tokens, max_draft, name, t)) return code;
  }
  if (const int code = print_bound_rows(**model, o, name, t, a, b, load_seconds)) return code;
  std::fprintf(stderr, "load average %.2f after %u thread(s)\n", load[0], t);
  std::fflush(stdout);
  (*model)->destroy_session(&s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Prefill and decode throughput of a Tern bundle"};
  BenchOptions o;
  add_bench_options(app, &o);
  CLI11_PARSE(app, argc, argv);
  {
    auto opened = tern::Bundle::open(o.bundle.c_str());
    if (opened.ok() && opened->config().embedding) {
      double load[3] = {0, 0, 0};
      getloadavg(load, 3);
      std::printf("kernels %s, load average %.2f at start\n\n", tern::to_string(tern::active_isa_level()), load[0]);
      return embedding_bench(o.bundle, o.threads, o.texts, o.text_tokens, o.embed_batch, o.reps, o.kv);
    }
  }
  const unsigned max_draft = o.verify.empty() ? 0u : *std::max_element(o.verify.begin(), o.verify.end());

  if (o.tg < max_draft + 1) o.tg = max_draft + 1;  // the verified tokens follow the prompt
  std::vector<int32_t> tokens(o.pp + o.tg);
  uint32_t state = 12345;
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  // The numbers mean little on a busy machine: say how busy it was.
  std::printf("kernels %s, load average %.2f at start\n\n", tern::to_string(tern::active_isa_level()), load[0]);
  std::printf("| model | threads | test | tokens/s |\n| --- | ---: | --- | ---: |\n");
  std::fflush(stdout);
  for (unsigned t : o.threads) {
    if (const int code = bench_threads(o, t, max_draft, tokens, state)) return code;
  }
  return 0;
}
