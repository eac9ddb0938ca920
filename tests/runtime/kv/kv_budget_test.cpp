// Unbounded generation in a fixed budget: a child process loads tiny-austen at the budget
// tern_plan() says a 260-token cache needs, generates 20,000 tokens (1,200 under emulation;
// TERN_SOAK_TOKENS overrides, as bench/runtime_soak.sh does for its 100,000), evicting every
// 32 tokens once full, and the parent checks
//  (a) the child's peak RSS (wait4's ru_maxrss) stays within the budget,
//  (b) the child made no heap call while generating (this binary interposes malloc/new),
//  (c) for q4, the text stays as fluent at the end as before the first eviction: the model's
//      own mean NLL of the generated tokens, re-scored by a fresh exact dense f32 session
//      with 255 tokens of preceding context, on the first and the last 256 tokens.
// (a) and (b) hold in every KV mode family (dense with eviction, q4, adaptive, aging tiers,
// per-head budgets); the child also times its first and last tenth, which the soak prints.
// Without re-positioning the sink query (TERN_KV_NO_SINK_REPOSITION=1) the last window is
// measurably worse, so the fluency check can fail.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "include/tern.h"
#include "tests/support/alloc_counter.h"
#include "tests/support/bundle_util.h"

namespace {

constexpr const char* kBundle = "tiny-austen-packed.tern";
constexpr uint32_t kCacheTokens = 260;  // 4 sinks + 6 blocks of 32 + window 32 + 32
constexpr uint32_t kWindow = 256;       // tokens per fluency window
constexpr const char* kPrompt = "It is a truth universally acknowledged, that a single man in possession";

bool emulated() { return std::getenv("TERN_SLOW_EMULATION") != nullptr; }
uint32_t tokens_to_generate() {
  if (const char* n = std::getenv("TERN_SOAK_TOKENS")) return static_cast<uint32_t>(std::strtoul(n, nullptr, 10));
  return emulated() ? 1200 : 20000;
}

// A KV mode family, as loaded: the bundle it needs, the mode and whether eviction is asked for.
struct SoakMode {
  const char* family;
  const char* bundle;
  const char* kv_mode;
  int32_t eviction;  // tern_model_params.kv_eviction
};
const SoakMode kQ4 = {"q4", kBundle, "q4", -1};

// ---- The child (forked, so its peak RSS is measured alone): load, generate, report. ----
int child_main(const SoakMode& mode, const char* out_path, uint64_t budget, uint32_t n) {
  const std::string path = tern::testing::bundle_path(mode.bundle);
  tern_model_params mp = tern_model_default_params();
  mp.memory_budget_bytes = budget;
  mp.kv_mode = mode.kv_mode;
  mp.kv_eviction = mode.eviction;
  mp.n_batch = 16;
  mp.n_threads = 1;
  tern_model* model = nullptr;
  auto check = [](tern_status s, const char* what) {
    if (s != TERN_OK)
      std::fprintf(stderr, "child: %s: %s (%s)\n", what, tern_last_error_message(), tern_status_string(s));
    return s == TERN_OK;
  };
  if (!check(tern_model_load(path.c_str(), &mp, &model), "load")) return 1;
  tern_memory_report report;
  if (!check(tern_memory_report_get(model, &report), "report")) return 1;
  tern_session_params sp = tern_session_default_params();
  sp.sampler.temperature = 0.8f;
  sp.sampler.top_k = 40;
  sp.sampler.seed = 1234;
  tern_session* session = nullptr;
  if (!check(tern_session_create(model, &sp, &session), "session")) return 1;
  std::vector<int32_t> tokens(n + 64);
  size_t prompt = 0;
  if (!check(tern_tokenize(model, kPrompt, std::strlen(kPrompt), 1, 0, tokens.data(), 64, &prompt), "tokenize"))
    return 1;
  tern_status s = TERN_OK;
  long calls = 0;
  // Decode speed in the first tenth of the tokens once the cache is full (before, attention
  // spans fewer positions) and in the last tenth: CPU seconds (one compute thread; wall time
  // would measure the neighbours on a shared machine) of the fastest of the ten windows each
  // tenth is cut into, so a neighbour's burst does not read as a slowdown.
  const uint32_t window = n / 100 > 0 ? n / 100 : 1, tenth = 10 * window;
  const uint32_t full = (kCacheTokens + window - 1) / window * window;  // the first window past the fill
  double first_tenth = 1e30, last_tenth = 1e30;
  auto cpu_seconds = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
  };
  {
    tern::test::AllocCounter counter;
    s = tern_prefill(session, tokens.data(), prompt);
    double t0 = cpu_seconds();
    for (uint32_t i = 0; i < n && s == TERN_OK; ++i) {
      int32_t token = 0;
      s = tern_sample(session, &token);
      if (s == TERN_OK) s = tern_decode(session, token);
      tokens[prompt + i] = token;
      if ((i + 1) % window == 0) {
        const double t1 = cpu_seconds();
        // Each tenth's time as if every window in it ran at its fastest one's speed.
        if (i >= full && i < full + tenth) first_tenth = std::min(first_tenth, 10 * (t1 - t0));
        if (i >= n - tenth) last_tenth = std::min(last_tenth, 10 * (t1 - t0));
        t0 = t1;
      }
    }
    calls = counter.calls();
  }
  if (!check(s, "generate")) return 1;
  uint32_t position = 0;
  tern_session_position(session, &position);
  FILE* out = std::fopen(out_path, "w");
  if (out == nullptr) return 1;
  std::fprintf(out, "%ld %u %d %u %zu %.6f %.6f %u\n", calls, report.context_tokens, report.kv_evicting, position,
               prompt, first_tenth, last_tenth, tenth);
  for (size_t i = 0; i < prompt + n; ++i) std::fprintf(out, "%d\n", tokens[i]);
  std::fclose(out);
  tern_session_free(session);
  tern_model_free(model);
  return 0;
}

// ---- The parent. ----
struct ChildResult {
  bool ok = false;
  uint64_t peak_rss = 0;
  long heap_calls = -1;
  uint32_t capacity = 0, evicting = 0, position = 0, prompt = 0;
  double first_tenth_s = 0, last_tenth_s = 0;
  uint32_t tenth = 0;
  std::vector<int32_t> tokens;
};

ChildResult run_child(const SoakMode& mode, uint64_t budget, uint32_t n, bool reposition) {
  ChildResult r;
  char out_path[] = "/tmp/tern_kv_budget_XXXXXX";
  const int fd = mkstemp(out_path);
  if (fd < 0) return r;
  close(fd);
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    // Read at load: the debug switch that turns the sink re-positioning off.
    if (!reposition) setenv("TERN_KV_NO_SINK_REPOSITION", "1", 1);
    _exit(child_main(mode, out_path, budget, n));
  }
  int status = 0;
  rusage usage{};
  if (pid < 0 || wait4(pid, &status, 0, &usage) != pid) return r;
  r.peak_rss = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
  std::ifstream in(out_path);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
      (in >> r.heap_calls >> r.capacity >> r.evicting >> r.position >> r.prompt >> r.first_tenth_s >> r.last_tenth_s >>
       r.tenth)) {
    int32_t t = 0;
    while (in >> t) r.tokens.push_back(t);
    r.ok = r.tokens.size() == r.prompt + n;
  }
  std::remove(out_path);
  return r;
}

// Mean NLL (nats) of tokens[begin, begin + kWindow) under a fresh exact dense session given
// up to 255 preceding tokens, and the share of distinct tokens in the window.
struct Fluency {
  double nll = 0;
  double distinct = 0;
};

Fluency score(tern_model* dense, const std::vector<int32_t>& tokens, size_t begin) {
  Fluency f;
  tern_session* s = nullptr;
  if (tern_session_create(dense, nullptr, &s) != TERN_OK) return f;
  const size_t ctx = begin < 255 ? begin : 255;
  EXPECT_EQ(tern_prefill(s, tokens.data() + begin - ctx, ctx), TERN_OK) << tern_last_error_message();
  std::vector<bool> seen(1 << 20);
  size_t distinct = 0;
  for (size_t i = begin; i < begin + kWindow; ++i) {
    const float* logits = nullptr;
    size_t vocab = 0;
    EXPECT_EQ(tern_get_logits(s, &logits, &vocab), TERN_OK);
    double mx = logits[0];
    for (size_t v = 1; v < vocab; ++v) mx = std::max<double>(mx, logits[v]);
    double sum = 0;
    for (size_t v = 0; v < vocab; ++v) sum += std::exp(logits[v] - mx);
    f.nll += -(logits[tokens[i]] - mx - std::log(sum));
    if (!seen[static_cast<size_t>(tokens[i])]) seen[static_cast<size_t>(tokens[i])] = true, ++distinct;
    EXPECT_EQ(tern_decode(s, tokens[i]), TERN_OK) << tern_last_error_message();
  }
  tern_session_free(s);
  f.nll /= kWindow;
  f.distinct = static_cast<double>(distinct) / kWindow;
  return f;
}

// The budget: what the planner says a cache of kCacheTokens positions needs in this mode.
uint64_t planned_budget(const SoakMode& mode) {
  const std::string path = tern::testing::bundle_path(mode.bundle);
  const char* modes[] = {mode.kv_mode};
  tern_model_params params = tern_model_default_params();
  params.n_ctx = kCacheTokens;
  params.n_batch = 16;
  params.kv_eviction = mode.eviction;
  params.n_threads = 1;
  tern_plan_row row{};
  size_t count = 0;
  EXPECT_EQ(tern_plan(path.c_str(), &params, modes, 1, &row, 1, &count), TERN_OK) << tern_last_error_message();
  EXPECT_EQ(row.status, TERN_OK) << mode.kv_mode;
  EXPECT_EQ(row.context_tokens, kCacheTokens) << mode.kv_mode;
  return row.total_bytes;
}

// (a) and (b) for one child, and its row of the soak table.
void expect_within_plan(const SoakMode& mode, const ChildResult& r, uint64_t budget, uint32_t n) {
  SCOPED_TRACE(mode.kv_mode);
  ASSERT_TRUE(r.ok) << "the child failed; run it alone to see why";
  EXPECT_EQ(r.capacity, kCacheTokens);
  EXPECT_EQ(r.evicting, 1u);
  EXPECT_EQ(r.position, r.prompt + n);
  // (b) nothing allocated while generating, through ~n/32 evictions.
  EXPECT_EQ(r.heap_calls, 0);
  // (a) the peak RSS within the budget (qemu-user's own memory is in the RSS when emulated).
  if (!emulated()) {
    EXPECT_LE(r.peak_rss, budget);
  }
  const double first = r.tenth / r.first_tenth_s, last = r.tenth / r.last_tenth_s;
  std::printf("| %s | `%s` | %u | %.2f | %.2f | %.1f %% | %.0f | %.0f | %+.1f %% |\n", mode.family, mode.kv_mode, n,
              budget / 1048576.0, r.peak_rss / 1048576.0, 100.0 * r.peak_rss / budget, first, last,
              100.0 * (last / first - 1));
}

void print_soak_header() {
  std::printf(
      "| family | kv mode | tokens | plan (MiB) | peak RSS (MiB) | RSS / plan | tok/CPU-s first tenth | "
      "tok/CPU-s last tenth | last vs first |\n|---|---|---|---|---|---|---|---|---|\n");  // (fastest windows)
}

TEST(KvBudget, UnboundedGenerationInAFixedBudget) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "sanitizers replace the allocator and add shadow memory";
#endif
  TERN_REQUIRE_BUNDLE(kBundle);
  const std::string path = tern::testing::bundle_path(kBundle);
  const uint64_t budget = planned_budget(kQ4);
  const uint32_t n = tokens_to_generate();

  const ChildResult on = run_child(kQ4, budget, n, true);
  print_soak_header();
  expect_within_plan(kQ4, on, budget, n);
  ASSERT_TRUE(on.ok);

  // (c) fluency: first window (before any eviction) vs the last one.
  tern_model_params mp = tern_model_default_params();
  tern_model* dense = nullptr;
  ASSERT_EQ(tern_model_load(path.c_str(), &mp, &dense), TERN_OK);
  const size_t first = on.prompt, last = on.tokens.size() - kWindow;
  const Fluency f0 = score(dense, on.tokens, first);
  const Fluency f1 = score(dense, on.tokens, last);
  const ChildResult off = run_child(kQ4, budget, n, false);
  ASSERT_TRUE(off.ok);
  const Fluency g1 = score(dense, off.tokens, off.tokens.size() - kWindow);
  tern_model_free(dense);
  std::printf(
      "mean NLL (nats) / distinct-token share: first window %.3f / %.3f; last window %.3f / %.3f; "
      "last window without sink re-positioning %.3f / %.3f\n",
      f0.nll, f0.distinct, f1.nll, f1.distinct, g1.nll, g1.distinct);
  // Measured (20,000 tokens, x86-64): first 2.300 / 0.496, last 2.379 / 0.523. Windows of
  // 256 tokens vary by ~0.15 nats on real text (teacher-forced austen windows: 3.16-3.63);
  // a collapse into noise raises the NLL by several nats, a collapse into a loop drops the
  // distinct-token share to a few percent. Thresholds: +0.5 nats, half the share.
  EXPECT_LE(f1.nll, f0.nll + 0.5);
  EXPECT_GE(f1.distinct, 0.5 * f0.distinct);
  // Sampled text from this small model does not separate the two (2.322 without vs 2.379
  // with re-positioning, within window noise): the teacher-forced check below does.
}

// Every KV mode family generates without end in the budget its plan states, allocating
// nothing: dense (f32/fp16 with eviction: a compressed cache of exact heads), the quantized
// blocks, calibrated per-head widths, aging tiers and per-head token budgets.
TEST(KvBudget, EveryKvModeFamilyStaysWithinItsPlan) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "sanitizers replace the allocator and add shadow memory";
#endif
  constexpr const char* kCalibrated = "tiny-austen-calibrated.tern";
  TERN_REQUIRE_BUNDLE(kBundle);
  TERN_REQUIRE_BUNDLE(kCalibrated);
  const SoakMode families[] = {
      {"dense", kBundle, "fp16", 1},
      {"quantized", kBundle, "q4", -1},
      {"adaptive", kCalibrated, "adaptive:3", -1},
      {"aging", kBundle, "q3>2@50%", -1},
      {"per-head budgets", kCalibrated, "q4/hh", -1},
  };
  // Under emulation, past the capacity and through a few evictions is enough: the budget test
  // above runs its 1,200 tokens there.
  const uint32_t n = emulated() && std::getenv("TERN_SOAK_TOKENS") == nullptr ? 400 : tokens_to_generate();
  print_soak_header();
  for (const SoakMode& mode : families) {
    const uint64_t budget = planned_budget(mode);
    expect_within_plan(mode, run_child(mode, budget, n, true), budget, n);
  }
}

// Teacher-forced: real text far past the capacity through the evicting q4 session, scored
// token by token. The model's NLL of the text must stay at its in-capacity level, and
// re-positioning the sink query must not be worse than leaving it (measured on 4,100
// tokens of austen_all.txt, 260-token cache: positions 520.. mean NLL 3.313 with, 3.319
// without; 3,000-6,000 at a 132-token cache: lower in 9 of 11 windows of 500). The gain is
// small on these models (their heads barely use the sinks: even 0 sinks costs nothing
// here); the exact check of the re-positioning is KvSession.SinkQueryIsRepositionedWithinTheCache.
double teacher_forced_nll(const std::string& bundle, const std::vector<int32_t>& ids, size_t from, bool reposition,
                          double* in_capacity) {
  if (!reposition) setenv("TERN_KV_NO_SINK_REPOSITION", "1", 1);
  tern_model_params mp = tern_model_default_params();
  mp.kv_mode = "q4";
  mp.n_ctx = kCacheTokens;
  tern_model* model = nullptr;
  const tern_status loaded = tern_model_load(bundle.c_str(), &mp, &model);
  unsetenv("TERN_KV_NO_SINK_REPOSITION");
  EXPECT_EQ(loaded, TERN_OK) << tern_last_error_message();
  if (loaded != TERN_OK) return 1e9;
  tern_session* s = nullptr;
  EXPECT_EQ(tern_session_create(model, nullptr, &s), TERN_OK);
  double nll = 0, early = 0;
  size_t n = 0, n_early = 0;
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    EXPECT_EQ(tern_decode(s, ids[i]), TERN_OK) << tern_last_error_message();
    const float* logits = nullptr;
    size_t vocab = 0;
    tern_get_logits(s, &logits, &vocab);
    double mx = logits[0];
    for (size_t v = 1; v < vocab; ++v) mx = std::max<double>(mx, logits[v]);
    double sum = 0;
    for (size_t v = 0; v < vocab; ++v) sum += std::exp(logits[v] - mx);
    const double x = -(logits[ids[i + 1]] - mx - std::log(sum));
    if (i >= from) nll += x, ++n;
    if (i < kCacheTokens) early += x, ++n_early;
  }
  tern_session_free(s);
  tern_model_free(model);
  if (in_capacity != nullptr) *in_capacity = early / static_cast<double>(n_early);
  return nll / static_cast<double>(n);
}

TEST(KvBudget, TextFarPastTheCapacityStaysPredictable) {
  TERN_REQUIRE_BUNDLE(kBundle);
  TERN_REQUIRE_FILE(tern::testing::austen_text());
  const std::string path = tern::testing::bundle_path(kBundle);
  std::ifstream in(tern::testing::austen_text(), std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.resize(std::min<size_t>(text.size(), 40000));
  tern_model_params mp = tern_model_default_params();
  tern_model* model = nullptr;
  ASSERT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_OK);
  std::vector<int32_t> ids(text.size() + 8);
  size_t n = 0;
  ASSERT_EQ(tern_tokenize(model, text.data(), text.size(), 1, 0, ids.data(), ids.size(), &n), TERN_OK);
  tern_model_free(model);
  ids.resize(std::min<size_t>(n, emulated() ? 1200 : 4100));
  double early = 0;
  const double with = teacher_forced_nll(path, ids, 2 * kCacheTokens, true, &early);
  const double without = teacher_forced_nll(path, ids, 2 * kCacheTokens, false, nullptr);
  std::printf("teacher-forced mean NLL: positions < %u %.4f; positions %u..%zu: %.4f re-positioned, %.4f not\n",
              kCacheTokens, early, 2 * kCacheTokens, ids.size(), with, without);
  EXPECT_LE(with, early + 0.3);
  EXPECT_LT(with, without);
}

}  // namespace
