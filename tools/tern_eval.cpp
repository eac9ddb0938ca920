// tern-eval: quality of KV-cache modes on text, through the runtime's own forward pass.
//   tern-eval BUNDLE --text FILE [--kv MODE] [--context N] [--json]
//   tern-eval BUNDLE --text FILE --sweep           (every mode: the Pareto table)
// Teacher-forced over the text in windows of --context tokens (each window a fresh cache),
// against an exact f32 dense-cache run: perplexity and its change, greedy agreement (same
// argmax as the exact run), mean cosine of the attention outputs per query head, and the
// cache's marginal bytes per token.
//   tern-eval BUNDLE --text FILE --stream [--kv MODE | --sweep] [--capacity N | --kv-budget B]
// One session per mode through the whole text, token by token, with a fixed-capacity evicting
// cache, against the exact stream under the same eviction and the full-context exact stream
// (kvq::run_stream): totals, aging modes ("q4>2@96") against every single-tier mode (paired),
// then every --segment tokens.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "converter/calibration/kv_quality.h"
#include "converter/report/chart.h"
#include "platform/thread_pool.h"
#include "runtime/engine/model.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/model/bundle.h"
#include "schema/bundle_generated.h"
#include "tools/common/cli_files.h"
#include "tools/common/model_options.h"

using namespace tern;

namespace {

std::string fmt_avg(float a) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(a));
  return buf;
}

nlohmann::json mode_json(const std::string& name, double bpt, double bits, const kvq::ModeStats& s,
                         const kvq::ModeStats& ref) {
  nlohmann::json j;
  j["mode"] = name;
  j["ppl"] = s.ppl();
  j["ppl_exact"] = ref.ppl();
  j["delta_ppl_percent"] = s.delta_ppl_percent();
  j["delta_ppl_se_percent"] = s.delta_ppl_se_percent();
  j["tokens"] = s.predictions;
  j["greedy_agreement"] = s.agreement();
  j["attention_cosine"] = s.mean_cosine();
  j["mean_kl"] = s.mean_kl();
  j["kv_bytes_per_token"] = bpt;
  j["bits_per_element"] = bits;
  return j;
}

std::string basename_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Marks the Pareto front (no other point has at most as many bytes and a lower ΔPPL) and
// writes the plot; false after printing why.
bool write_plot(std::vector<chart::ParetoPoint> points, const std::string& title, const std::string& subtitle,
                const std::string& path) {
  chart::mark_pareto_front(points);
  std::string error;
  if (!chart::write_picture(chart::pareto_chart(title, subtitle, points), path, &error)) {
    std::fprintf(stderr, "tern-eval: %s\n", error.c_str());
    return false;
  }
  return true;
}

// --kv-budget: bytes, or a percentage of the dense fp16 cache holding the model's context.
bool parse_budget(const std::string& text, const ModelConfig& c, uint64_t* out) {
  if (text.empty()) return (*out = 0), true;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || v <= 0) return false;
  if (*end == '%' && end[1] == '\0') {
    const double full = static_cast<double>(dense_kv_arena_bytes(KvType::F16, kv_shape_of(c), c.max_context));
    *out = static_cast<uint64_t>(full * v / 100.0);
    return true;
  }
  if (*end != '\0') return false;
  *out = static_cast<uint64_t>(v);
  return true;
}

nlohmann::json summary_json(const kvq::StreamSummary& s) {
  return {{"first", s.begin},
          {"end", s.end},
          {"ppl", s.ppl},
          {"ppl_reference", s.ppl_reference},
          {"delta_ppl_percent", s.delta_ppl_percent},
          {"delta_ppl_se_percent", s.delta_ppl_se_percent},
          {"mean_kl", s.mean_kl},
          {"greedy_agreement", s.agreement},
          {"exact_fraction", s.exact_fraction},
          {"compressed_fraction", s.compressed_fraction},
          {"evicted_fraction", s.evicted_fraction}};
}

// A stream run's facts beside its traces, for the plot, the JSON and the tables.
struct StreamReport {
  std::string bundle_path, text_path;
  size_t text_tokens = 0;
  size_t predictions = 0;
  uint32_t segment = 0;
  double seconds = 0;
  uint64_t budget_bytes = 0;
  size_t full_bytes = 0;  // the full-context fp16 dense cache
};

// --plot: each mode's bytes per token against its ΔPPL; false after printing why.
bool plot_stream(const std::vector<kvq::KvMode>& modes, const kvq::StreamResult& r, const StreamReport& rep,
                 const std::string& plot_path) {
  // Stream: ΔPPL against the full-context exact stream (what each mode's cache costs in all).
  std::vector<chart::ParetoPoint> points;
  for (size_t i = 0; i < modes.size(); ++i) {
    const kvq::StreamSummary f = kvq::summarize(r.modes[i], r.full, 0, rep.predictions, true);
    points.push_back({modes[i].name, modes[i].bytes_per_token(), f.delta_ppl_percent, f.delta_ppl_se_percent, false});
  }
  char sub[256];
  std::snprintf(sub, sizeof sub,
                "one stream of %zu tokens of %s, evicting caches%s; against the full-context exact stream",
                rep.text_tokens, basename_of(rep.text_path).c_str(), rep.budget_bytes ? " in one byte budget" : "");
  return write_plot(points, basename_of(rep.bundle_path) + ": KV modes, PPL change against bytes", sub, plot_path);
}

void print_stream_json(const std::vector<kvq::KvMode>& modes, const kvq::StreamResult& r, const StreamReport& rep) {
  const size_t n = rep.predictions;
  const uint32_t segment = rep.segment;
  nlohmann::json out;
  out["bundle"] = rep.bundle_path;
  out["text"] = rep.text_path;
  out["text_tokens"] = rep.text_tokens;
  out["predictions"] = rep.predictions;
  out["segment"] = rep.segment;
  out["seconds"] = rep.seconds;
  out["budget_bytes"] = rep.budget_bytes;
  out["full_context_fp16_dense_bytes"] = rep.full_bytes;
  out["full_context_exact"] = {{"capacity", r.full.capacity}, {"ppl", kvq::summarize(r.full, r.full, 0, n, true).ppl}};
  out["modes"] = nlohmann::json::array();
  for (size_t i = 0; i < modes.size(); ++i) {
    const kvq::StreamTrace& t = r.modes[i];
    const kvq::StreamTrace& same = r.same[t.same_reference];
    nlohmann::json m;
    m["mode"] = t.name;
    m["capacity"] = t.capacity;
    m["kv_cache_bytes"] = t.cache_bytes;
    m["kv_bytes_per_token"] = modes[i].bytes_per_token();
    m["vs_same_eviction_exact"] = summary_json(kvq::summarize(t, same, 0, n, false));
    m["vs_full_context_exact"] = summary_json(kvq::summarize(t, r.full, 0, n, true));
    m["segments"] = nlohmann::json::array();
    for (size_t b = 0; b < n; b += segment)
      m["segments"].push_back(
          {{"vs_same_eviction_exact", summary_json(kvq::summarize(t, same, b, b + segment, false))},
           {"vs_full_context_exact", summary_json(kvq::summarize(t, r.full, b, b + segment, true))}});
    if (t.name.find('>') != std::string::npos) {
      // Aging modes against every single-tier mode, paired per position.
      m["vs_single_tier_modes"] = nlohmann::json::array();
      for (size_t j = 0; j < modes.size(); ++j) {
        if (r.modes[j].name.find('>') != std::string::npos) continue;
        const kvq::StreamSummary d = kvq::summarize(t, r.modes[j], 0, n, false);
        m["vs_single_tier_modes"].push_back({{"mode", r.modes[j].name},
                                             {"delta_ppl_percent", d.delta_ppl_percent},
                                             {"delta_ppl_se_percent", d.delta_ppl_se_percent}});
      }
    }
    out["modes"].push_back(m);
  }
  std::printf("%s\n", out.dump(2).c_str());
}

void print_aging_pairs(const std::vector<kvq::KvMode>& modes, const kvq::StreamResult& r, size_t n) {
  // Aging modes ("q4>2@96") against every single-tier mode, position by position: the paired
  // difference of the two streams' NLL (each the other's reference).
  bool aging_header = false;
  for (size_t i = 0; i < modes.size(); ++i) {
    if (modes[i].name.find('>') == std::string::npos) continue;
    for (size_t j = 0; j < modes.size(); ++j) {
      if (modes[j].name.find('>') != std::string::npos) continue;
      if (!aging_header) {
        std::printf(
            "\n| aging mode | vs | KV bytes (aging / other) | positions (aging / other) | ΔPPL aging vs other "
            "(paired) |\n| --- | --- | ---: | ---: | ---: |\n");
        aging_header = true;
      }
      const kvq::StreamSummary d = kvq::summarize(r.modes[i], r.modes[j], 0, n, false);
      std::printf("| %s | %s | %zu / %zu | %u / %u | %+.3f ± %.3f %% |\n", modes[i].name.c_str(), modes[j].name.c_str(),
                  r.modes[i].cache_bytes, r.modes[j].cache_bytes, r.modes[i].capacity, r.modes[j].capacity,
                  d.delta_ppl_percent, d.delta_ppl_se_percent);
    }
  }
}

void print_stream_tables(const std::vector<kvq::KvMode>& modes, const kvq::StreamResult& r, const StreamReport& rep) {
  const size_t n = rep.predictions;
  const kvq::StreamSummary full = kvq::summarize(r.full, r.full, 0, n, true);
  std::printf(
      "%s on %s: one stream of %zu tokens (%zu predictions), %.1f s; full-context exact stream (f32, %u "
      "positions) PPL %.4f\n",
      rep.bundle_path.c_str(), rep.text_path.c_str(), rep.text_tokens, n, rep.seconds, r.full.capacity, full.ppl);
  if (rep.budget_bytes)
    std::printf("KV budget %llu bytes per mode (%.1f %% of the full-context fp16 dense cache, %zu bytes)\n",
                static_cast<unsigned long long>(rep.budget_bytes),
                100.0 * double(rep.budget_bytes) / double(rep.full_bytes), rep.full_bytes);
  std::printf(
      "\n| mode | positions held | KV bytes | PPL | exact PPL, same eviction | ΔPPL vs same-eviction exact | "
      "mean KL x1e3 | agreement | ΔPPL vs full-context exact | exact / compressed / evicted at end |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (size_t i = 0; i < modes.size(); ++i) {
    const kvq::StreamTrace& t = r.modes[i];
    const kvq::StreamSummary a = kvq::summarize(t, r.same[t.same_reference], 0, n, false);
    const kvq::StreamSummary b = kvq::summarize(t, r.full, 0, n, true);
    std::printf(
        "| %s | %u | %zu | %.4f | %.4f | %+.3f ± %.3f %% | %.4f | %.2f %% | %+.3f ± %.3f %% | %.1f / %.1f / %.1f %% "
        "|\n",
        t.name.c_str(), t.capacity, t.cache_bytes, a.ppl, a.ppl_reference, a.delta_ppl_percent, a.delta_ppl_se_percent,
        1e3 * a.mean_kl, 100.0 * a.agreement, b.delta_ppl_percent, b.delta_ppl_se_percent, 100.0 * a.exact_fraction,
        100.0 * a.compressed_fraction, 100.0 * a.evicted_fraction);
  }
  print_aging_pairs(modes, r, n);
  for (size_t i = 0; i < modes.size(); ++i) {
    const kvq::StreamTrace& t = r.modes[i];
    std::printf(
        "\n%s, per %u predictions:\n\n| predictions | PPL | ΔPPL vs same-eviction exact | mean KL x1e3 | "
        "agreement | ΔPPL vs full-context exact | exact / compressed / evicted |\n"
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        t.name.c_str(), rep.segment);
    for (size_t b = 0; b < n; b += rep.segment) {
      const kvq::StreamSummary a = kvq::summarize(t, r.same[t.same_reference], b, b + rep.segment, false);
      const kvq::StreamSummary f = kvq::summarize(t, r.full, b, b + rep.segment, true);
      std::printf("| %zu-%zu | %.3f | %+.3f ± %.3f %% | %.4f | %.2f %% | %+.3f ± %.3f %% | %.1f / %.1f / %.1f %% |\n",
                  a.begin, a.end - 1, a.ppl, a.delta_ppl_percent, a.delta_ppl_se_percent, 1e3 * a.mean_kl,
                  100.0 * a.agreement, f.delta_ppl_percent, f.delta_ppl_se_percent, 100.0 * a.exact_fraction,
                  100.0 * a.compressed_fraction, 100.0 * a.evicted_fraction);
    }
  }
}

int run_stream_eval(const Model& model, std::vector<kvq::KvMode>& modes, const std::vector<int32_t>& ids,
                    const std::string& bundle_path, const std::string& text_path, uint32_t capacity,
                    const std::string& budget_text, uint32_t segment, uint32_t threads, bool json, bool bar,
                    const std::string& plot_path) {
  const ModelConfig& c = model.config();
  kvq::StreamOptions opt;
  opt.capacity = capacity;
  opt.threads = threads;
  if (!parse_budget(budget_text, c, &opt.budget_bytes)) {
    std::fprintf(stderr, "tern-eval: --kv-budget '%s': bytes or a percentage (e.g. 50%%)\n", budget_text.c_str());
    return 2;
  }
  if (bar) {
    opt.progress = [](uint64_t done, uint64_t total) {
      static uint64_t last = 0;
      if (done * 200 / total == last && done != total) return;
      last = done * 200 / total;
      std::fprintf(stderr, "\rstream %5.1f%%", 100.0 * static_cast<double>(done) / static_cast<double>(total));
      if (done == total) std::fputc('\n', stderr);
    };
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto r = kvq::run_stream(model, modes, ids, opt);
  if (!r.ok()) {
    std::fprintf(stderr, "tern-eval: %s\n", last_error_message());
    return 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  StreamReport rep;
  rep.bundle_path = bundle_path;
  rep.text_path = text_path;
  rep.text_tokens = ids.size();
  rep.predictions = r->full.nll.size();
  rep.segment = segment;
  rep.seconds = seconds;
  rep.budget_bytes = opt.budget_bytes;
  rep.full_bytes = dense_kv_arena_bytes(KvType::F16, kv_shape_of(c), c.max_context);
  if (!plot_path.empty() && !plot_stream(modes, *r, rep, plot_path)) return 1;
  if (json) {
    print_stream_json(modes, *r, rep);
    return 0;
  }
  print_stream_tables(modes, *r, rep);
  return 0;
}

// What tern-eval's flags ask for.
struct EvalOptions {
  std::string bundle_path, text_path, kv = "fp16", modes_list;
  uint32_t context = 0, max_windows = 0, group = 0;
  size_t tail_bytes = 0;
  int kv_window = -1, kv_sinks = -1;
  bool json = false, sweep = false, bos_per_paragraph = false, quiet = false;
  bool stream = false;
  uint32_t capacity = 0, segment = 512;
  std::string budget_text, plot_path;
  uint32_t threads = static_cast<uint32_t>(available_cores());
};

// Every flag, in the order --help lists them.
void add_eval_options(CLI::App& app, EvalOptions* o) {
  app.add_option("bundle", o->bundle_path, ".tern bundle")->required();
  app.add_option("--text", o->text_path, "text file to evaluate on")->required();
  app.add_option("--kv", o->kv,
                 "KV mode: fp16, f32, q8, q4, q3, q2, k4v2, adaptive:B, uniform:B; any compressed one + >A@N for "
                 "aging tiers (blocks more than N tokens past the exact window stored at most A bits wide, "
                 "e.g. q4>2@96); any one + /hh for heavy-hitter eviction with per-head budgets (--stream; "
                 "q4/hh, q4/hh=equal, q4/hh@50%)");
  app.add_option("--context", o->context, "window length in tokens (default: the model's context)");
  app.add_option("--windows", o->max_windows, "evaluate at most this many windows (default: the whole text)");
  app.add_option("--tail-bytes", o->tail_bytes, "evaluate only the last N bytes of the text (held-out part)");
  cli::add_kv_layout_options(app, &o->kv_window, &o->kv_sinks, "the bundle's, or 32; every compressed mode",
                             "the bundle's, or 4; every compressed mode");
  app.add_option("--group", o->group, "override the key block / flush length G of every quantized mode (e.g. 128)");
  app.add_flag("--bos-per-paragraph", o->bos_per_paragraph,
               "BOS before every blank-line-separated paragraph (TinyStories)");
  app.add_flag("--sweep", o->sweep, "every mode (or --modes a,b,...): a table with the Pareto front");
  app.add_option("--modes", o->modes_list, "comma-separated modes for --sweep");
  app.add_flag("--stream", o->stream, "one session per mode through the whole text with an evicting cache");
  app.add_option("--capacity", o->capacity, "--stream: KV positions every mode holds (default: the model's context)");
  app.add_option("--kv-budget", o->budget_text,
                 "--stream: KV bytes per mode instead (e.g. 65536, or 50% of the full-context fp16 dense cache)");
  app.add_option("--segment", o->segment, "--stream: report every N predictions")->check(CLI::PositiveNumber);
  app.add_option("--plot", o->plot_path,
                 "write the Pareto plot (ΔPPL against KV bytes per token) to FILE.svg or FILE.png");
  app.add_flag("--json", o->json, "one JSON object");
  app.add_flag("-q,--quiet", o->quiet, "no progress on stderr");
  app.add_option("--threads", o->threads, "modes evaluated in parallel (default: one per core)")
      ->check(CLI::PositiveNumber);
}

// The modes to run: --sweep's (the fixed ones, then uniform:B and adaptive:B at every
// calibrated average), --modes' list, or --kv.
std::vector<std::string> mode_names(const Model& model, const EvalOptions& o) {
  std::vector<std::string> names;
  if (o.sweep && o.modes_list.empty()) {
    names = {"fp16", "q8", "q4", "q3", "q2", "k4v2"};
    const schema::KvProfile* p = model.bundle()->kv_profile();
    if (p != nullptr && p->allocations() != nullptr) {
      for (const schema::KvAllocation* a : *p->allocations()) {
        names.push_back("uniform:" + fmt_avg(a->average_bits()));
        names.push_back("adaptive:" + fmt_avg(a->average_bits()));
      }
    }
  } else if (!o.modes_list.empty()) {
    std::stringstream list(o.modes_list);
    for (std::string m; std::getline(list, m, ',');)
      if (!m.empty()) names.push_back(m);
  } else {
    names = {o.kv};
  }
  return names;
}

// The named modes with the layout flags on every compressed one; false after saying why.
bool resolve_modes(const Model& model, const std::vector<std::string>& names, const EvalOptions& o,
                   std::vector<kvq::KvMode>* modes) {
  kvq::KvSettings settings = kvq::settings_from_model(model, kvq::KvSettings{});
  for (const std::string& name : names) {
    auto m = kvq::mode_by_name(model, name, settings);
    if (!m.ok()) {
      std::fprintf(stderr, "tern-eval: %s\n", last_error_message());
      return false;
    }
    if (o.stream && !m->spec.compressed) {
      // A stream evicts: exact modes become caches of exact heads (as --evict does in tern-run).
      const ModelConfig& mc = model.config();
      kvq::KvSettings exact = settings;
      exact.exact_type = m->spec.dense_type;
      m = kvq::compressed_mode(name, mc, exact,
                               std::vector<KvHeadBits>(static_cast<size_t>(mc.layers) * mc.kv_heads, KvHeadBits{0, 0}));
    }
    if (m->spec.compressed) {
      if (o.group != 0) m->spec.profile.block_tokens = o.group;
      if (o.kv_sinks >= 0) m->spec.profile.sink_tokens = static_cast<uint32_t>(o.kv_sinks);
      if (o.kv_window >= 0) m->spec.profile.recent_window = static_cast<uint32_t>(o.kv_window);
    }
    modes->push_back(std::move(m).value());
  }
  return true;
}

// adaptive:B against uniform:B (equal bytes) wherever both were run, position by position.
struct Pair {
  std::string adaptive, uniform;
  kvq::Comparison c;
};

std::vector<Pair> adaptive_pairs(const std::vector<kvq::KvMode>& modes, const kvq::RunResult& result) {
  std::vector<Pair> pairs;
  for (size_t i = 0; i < modes.size(); ++i) {
    if (modes[i].name.rfind("adaptive:", 0) != 0) continue;
    const std::string u = "uniform:" + modes[i].name.substr(9);
    for (size_t j = 0; j < modes.size(); ++j) {
      if (modes[j].name != u) continue;
      auto c = kvq::compare(result.modes[i], result.modes[j]);
      if (c.ok()) pairs.push_back(Pair{modes[i].name, u, *c});
    }
  }
  return pairs;
}

// What a windowed run measured, in one JSON object.
void print_windows_json(const EvalOptions& o, const std::vector<kvq::KvMode>& modes, const kvq::RunResult& result,
                        const std::vector<Pair>& pairs, uint32_t ctx, size_t text_tokens, double seconds) {
  const kvq::ModeStats& ref = result.reference;
  nlohmann::json out;
  if (!o.sweep && modes.size() == 1) {
    out = mode_json(modes[0].name, modes[0].bytes_per_token(), modes[0].bits_per_element(), result.modes[0], ref);
  } else {
    out["modes"] = nlohmann::json::array();
    for (size_t i = 0; i < modes.size(); ++i)
      out["modes"].push_back(
          mode_json(modes[i].name, modes[i].bytes_per_token(), modes[i].bits_per_element(), result.modes[i], ref));
  }
  if (!pairs.empty()) {
    out["adaptive_vs_uniform"] = nlohmann::json::array();
    for (const Pair& p : pairs)
      out["adaptive_vs_uniform"].push_back({{"adaptive", p.adaptive},
                                            {"uniform", p.uniform},
                                            {"delta_ppl_percent", p.c.delta_ppl_percent},
                                            {"delta_ppl_se_percent", p.c.delta_ppl_se_percent},
                                            {"delta_agreement_points", p.c.delta_agreement_points},
                                            {"delta_agreement_se_points", p.c.delta_agreement_se_points}});
  }
  out["bundle"] = o.bundle_path;
  out["text"] = o.text_path;
  out["context"] = ctx;
  out["text_tokens"] = text_tokens;
  out["seconds"] = seconds;
  std::printf("%s\n", out.dump(2).c_str());
}

// What a windowed run measured, as Markdown tables.
void print_windows_table(const EvalOptions& o, const std::vector<kvq::KvMode>& modes, const kvq::RunResult& result,
                         const std::vector<Pair>& pairs, uint32_t ctx, size_t text_tokens, double seconds) {
  const kvq::ModeStats& ref = result.reference;
  std::printf("%s on %s: %zu tokens, windows of %u, %llu predictions, exact (f32 KV) PPL %.4f, %.1f s\n",
              o.bundle_path.c_str(), o.text_path.c_str(), text_tokens, ctx,
              static_cast<unsigned long long>(ref.predictions), ref.ppl(), seconds);
  // Pareto: no other mode (exact f32 included) is at most as many bytes with a lower PPL.
  auto pareto = [&](size_t i) {
    const double b = modes[i].bytes_per_token(), p = result.modes[i].ppl();
    for (size_t j = 0; j < modes.size(); ++j)
      if (j != i && modes[j].bytes_per_token() <= b && result.modes[j].ppl() < p) return false;
    return true;
  };
  // ΔPPL ± its standard error (paired per-position NLL differences); mean KL(exact || mode) of
  // the next-token distributions measures closeness to the exact model without the noise of
  // the observed tokens (a mode can score below the exact PPL by chance, not by fidelity).
  std::printf(
      "| mode | KV bytes/token | bits/element | PPL | ΔPPL vs exact | greedy agreement | mean KL x1e3 | "
      "attention cosine | Pareto |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: |\n");
  for (size_t i = 0; i < modes.size(); ++i) {
    const kvq::ModeStats& s = result.modes[i];
    std::printf("| %s | %.0f | %.2f | %.4f | %+.3f ± %.3f %% | %.2f %% | %.4f | %.5f | %s |\n", modes[i].name.c_str(),
                modes[i].bytes_per_token(), modes[i].bits_per_element(), s.ppl(), s.delta_ppl_percent(),
                s.delta_ppl_se_percent(), 100.0 * s.agreement(), 1e3 * s.mean_kl(), s.mean_cosine(),
                pareto(i) ? "*" : "");
  }
  if (!pairs.empty()) {
    // Paired over the same positions: a difference within ~2 standard errors is noise.
    std::printf(
        "\n| adaptive vs uniform (equal bytes) | PPL change | greedy agreement change |\n| --- | ---: | ---: |\n");
    for (const Pair& p : pairs)
      std::printf("| %s vs %s | %+.3f ± %.3f %% | %+.2f ± %.2f points |\n", p.adaptive.c_str(), p.uniform.c_str(),
                  p.c.delta_ppl_percent, p.c.delta_ppl_se_percent, p.c.delta_agreement_points,
                  p.c.delta_agreement_se_points);
  }
}

// Teacher-forced windows of --context tokens per mode against the exact run: the plot, then
// JSON or the tables; the exit code.
int run_window_eval(const Model& model, std::vector<kvq::KvMode>& modes, const std::vector<int32_t>& ids,
                    const EvalOptions& o) {
  kvq::RunOptions run;
  run.context = o.context;
  run.max_windows = o.max_windows;
  run.threads = o.threads;
  run.per_position = true;
  const bool bar = !o.quiet && isatty(STDERR_FILENO);
  if (bar) {
    run.progress = [](uint64_t done, uint64_t total) {
      if (done % 256 != 0 && done != total) return;
      std::fprintf(stderr, "\reval %5.1f%%", 100.0 * static_cast<double>(done) / static_cast<double>(total));
      if (done == total) std::fputc('\n', stderr);
    };
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto result = kvq::run_modes(model, modes, ids, run);
  if (!result.ok()) {
    std::fprintf(stderr, "tern-eval: %s\n", last_error_message());
    return 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const ModelConfig& c = model.config();
  const uint32_t ctx = o.context ? std::min(o.context, c.max_context) : c.max_context;
  const kvq::ModeStats& ref = result->reference;
  const std::vector<Pair> pairs = adaptive_pairs(modes, *result);
  if (!o.plot_path.empty()) {
    std::vector<chart::ParetoPoint> points;
    for (size_t i = 0; i < modes.size(); ++i)
      points.push_back({modes[i].name, modes[i].bytes_per_token(), result->modes[i].delta_ppl_percent(),
                        result->modes[i].delta_ppl_se_percent(), false});
    char sub[256];
    std::snprintf(sub, sizeof sub, "%s, %llu predictions in windows of %u tokens; exact (f32 KV) PPL %.3f",
                  basename_of(o.text_path).c_str(), static_cast<unsigned long long>(ref.predictions), ctx, ref.ppl());
    if (!write_plot(points, basename_of(o.bundle_path) + ": KV modes, PPL change against bytes", sub, o.plot_path)) {
      return 1;
    }
  }
  if (o.json) {
    print_windows_json(o, modes, *result, pairs, ctx, ids.size(), seconds);
  } else {
    print_windows_table(o, modes, *result, pairs, ctx, ids.size(), seconds);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tern-eval: KV-cache mode quality (perplexity, greedy agreement, attention cosine) on text"};
  EvalOptions o;
  add_eval_options(app, &o);
  CLI11_PARSE(app, argc, argv);

  if (o.threads > available_cores()) {
    std::fprintf(stderr, "tern-eval: --threads %u is more than the %zu cores; using %zu\n", o.threads,
                 available_cores(), available_cores());
    o.threads = static_cast<uint32_t>(available_cores());
  }
  ModelParams params;
  params.threads = 1;
  auto loaded = Model::load(o.bundle_path.c_str(), params);
  if (!loaded.ok()) {
    std::fprintf(stderr, "tern-eval: %s\n", last_error_message());
    return 1;
  }
  Model& model = **loaded;
  std::string text;
  std::string why;
  if (!cli::read_file(o.text_path, &text, &why)) {
    std::fprintf(stderr, "tern-eval: cannot read %s\n", why.c_str());
    return 1;
  }
  auto ids = kvq::tokenize_text(model, text, o.bos_per_paragraph, o.tail_bytes);
  if (!ids.ok()) {
    std::fprintf(stderr, "tern-eval: %s\n", last_error_message());
    return 1;
  }
  std::vector<kvq::KvMode> modes;
  if (!resolve_modes(model, mode_names(model, o), o, &modes)) return 2;
  if (o.stream) {
    return run_stream_eval(model, modes, *ids, o.bundle_path, o.text_path, o.capacity, o.budget_text, o.segment,
                           o.threads, o.json, !o.quiet && isatty(STDERR_FILENO), o.plot_path);
  }
  return run_window_eval(model, modes, *ids, o);
}
