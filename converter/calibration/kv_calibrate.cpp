#include "converter/calibration/kv_calibrate.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <numeric>

#include "converter/calibration/kv_calibration_text.h"
#include "converter/report/heatmap_png.h"
#include "runtime/engine/model.h"

namespace tern::convert {

namespace {

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof(buf), f, ap);
  va_end(ap);
  return buf;
}

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size();) {  // ties share their mean rank
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[order[k]] = 0.5 * static_cast<double>(i + j);
    i = j + 1;
  }
  return r;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n, mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0.0;
}

std::string widths_string(const std::vector<uint8_t>& bits, uint32_t kv_heads) {
  std::string s;
  for (size_t i = 0; i < bits.size(); ++i) {
    if (i && i % kv_heads == 0) s += ' ';
    s += bits[i] == 0 ? "F" : std::to_string(bits[i]);
  }
  return s;
}

// Scatters an allocation over the quantized heads back to every head (0 = exact).
std::vector<uint8_t> scatter(const kvcal::Allocation& a, const std::vector<bool>& exact) {
  std::vector<uint8_t> bits(exact.size(), 0);
  for (size_t i = 0, k = 0; i < exact.size(); ++i)
    if (!exact[i]) bits[i] = k < a.bits.size() ? a.bits[k++] : 0;
  return bits;
}

std::string render_report(const std::string& bundle_path, const CalibrationOptions& o, const CalibrationResult& r) {
  std::string md;
  const size_t n = static_cast<size_t>(r.layers) * r.kv_heads;
  const uint32_t group = r.heads / r.kv_heads;
  md += fmt("# KV calibration: %s\n\n", bundle_path.c_str());
  md +=
      fmt("%u layers x %u query heads / %u KV heads. Calibration text: %s, %u positions in windows of %u "
          "(teacher-forced, the runtime's forward pass). Time %.1f s.\n\n",
          r.layers, r.heads, r.kv_heads, o.text_label.c_str(), r.tokens, r.context, r.seconds);
  md +=
      fmt("Cache settings: %u sink tokens, exact recent window %u, key block %u, value group %u, Hadamard "
          "rotation, exact rows f16.\n\n",
          o.sink_tokens, o.recent_window, o.block_tokens, o.value_group);
  md +=
      fmt("GQA: a KV head's entropy is the %s over its %u query heads. Spearman rank correlation of the KV "
          "head's entropy with its measured 2-bit sensitivity: min %.2f, mean %.2f (negative: focused heads "
          "are more sensitive).\n\n",
          o.combine == kvcal::GqaCombine::Min ? "minimum" : "mean", group, r.rank_corr_min, r.rank_corr_mean);
  md +=
      "Sensitivity = mean KL(exact || that KV head alone quantized) of the next-token distribution, x 1e-3 "
      "nats. Sink heads (class sink) stay exact (F).\n\n";
  md += fmt("## Heads (primary allocation: %.2f average bits)\n\n", o.average_bits);
  md += "| layer | KV head | query heads H (bits) | H | H2 | class | KL@2 | KL@3 | KL@4 | KL@8 | K/V bits |\n";
  md += "| ---: | ---: | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n";
  for (size_t i = 0; i < n; ++i) {
    const KvHeadProfileIR& h = r.profile.heads[i];
    std::string q;
    for (float e : h.query_shannon_entropy) q += fmt("%s%.2f", q.empty() ? "" : " ", static_cast<double>(e));
    md += fmt("| %u | %u | %s | %.2f | %.2f | %s | %.3f | %.3f | %.3f | %.3f | %s |\n", h.layer, h.kv_head, q.c_str(),
              static_cast<double>(h.shannon_entropy), static_cast<double>(h.renyi2_entropy),
              kvcal::to_string(static_cast<kvcal::HeadClass>(h.kv_class)), r.sensitivity[i][0] * 1e3,
              r.sensitivity[i][1] * 1e3, r.sensitivity[i][2] * 1e3, r.sensitivity[i][3] * 1e3,
              h.sink ? "F/F" : fmt("%u/%u", h.key_bits, h.value_bits).c_str());
  }
  md +=
      "\n## Per layer (classes and bits of each KV head at the primary average)\n\n| layer | classes | bits |\n| ---: "
      "| --- | --- |\n";
  for (uint32_t l = 0; l < r.layers; ++l) {
    std::string classes, bits;
    for (uint32_t k = 0; k < r.kv_heads; ++k) {
      const KvHeadProfileIR& h = r.profile.heads[static_cast<size_t>(l) * r.kv_heads + k];
      classes += fmt("%s%s", k ? ", " : "", kvcal::to_string(static_cast<kvcal::HeadClass>(h.kv_class)));
      bits += fmt("%s%s", k ? ", " : "", h.sink ? "fp16" : std::to_string(h.key_bits).c_str());
    }
    md += fmt("| %u | %s | %s |\n", l, classes.c_str(), bits.c_str());
  }
  md += fmt("\n## Allocations (calibration text; exact f32 PPL %.4f)\n\n", r.reference.ppl());
  md +=
      "Each average is over the quantized heads (keys and values at the head's width). The recorded rule is the "
      "candidate with the least mean KL(exact || mode) among those not worse than uniform in both KL and greedy "
      "agreement (PPL on a few hundred positions is too noisy to rank allocations).\n\n";
  md +=
      "| average | candidate | widths (layer-major) | bytes/token | PPL | ΔPPL | greedy agreement | mean KL x1e3 | "
      "recorded |\n";
  md += "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n";
  for (const AverageResult& a : r.averages) {
    for (size_t c = 0; c < a.candidates.size(); ++c) {
      const CandidateResult& cr = a.candidates[c];
      md += fmt("| %.2f | %s | %s | %.0f | %.4f | %+.3f %% | %.2f %% | %.4f | %s |\n", a.average_bits, cr.rule.c_str(),
                widths_string(cr.bits, r.kv_heads).c_str(), cr.bytes_per_token, cr.stats.ppl(),
                100.0 * (cr.stats.ppl() / r.reference.ppl() - 1.0), 100.0 * cr.stats.agreement(),
                cr.stats.mean_kl() * 1e3, c == a.chosen ? "**yes**" : "");
    }
  }
  return md;
}

// The calibration positions: the text's tokens, at most o.tokens, enough that some rows get quantized.
Result<std::vector<int32_t>> calibration_tokens(Model& model, const CalibrationOptions& o) {
  auto ids_r = kvq::tokenize_text(model, o.text.empty() ? std::string(kBuiltinCalibrationText) : o.text, false);
  if (!ids_r.ok()) return ids_r.error();
  std::vector<int32_t> ids = std::move(ids_r).value();
  if (ids.size() > o.tokens) ids.resize(o.tokens);
  TERN_CHECK_OR_RETURN(ids.size() >= 2 * static_cast<size_t>(o.recent_window + o.block_tokens + o.sink_tokens),
                       Error::InvalidArgument,
                       "calibration text too short: %zu tokens (quantization starts after %u; give more text)",
                       ids.size(), o.sink_tokens + o.recent_window + o.block_tokens);
  return ids;
}

// Phase 1: entropies (reference run) and per-head sensitivity, in one lockstep run. The
// one-head modes keep every other head and the exact rows in f32, so the only difference
// from the reference is that head's quantization. Fills r's reference, sensitivity and
// per-query-head entropies.
Error measure_heads(const Model& model, const kvq::KvSettings& settings, const std::vector<int32_t>& ids,
                    const CalibrationOptions& o, CalibrationResult* r) {
  const ModelConfig& c = model.config();
  const size_t n = static_cast<size_t>(c.layers) * c.kv_heads;
  std::vector<kvcal::HeadEntropy> entropy(static_cast<size_t>(c.layers) * c.heads);
  std::vector<kvq::KvMode> probes;
  kvq::KvSettings probe_settings = settings;
  probe_settings.exact_type = KvType::F32;
  for (size_t h = 0; h < n; ++h) {
    for (int w : kvcal::kWidths) {
      std::vector<KvHeadBits> bits(n, KvHeadBits{0, 0});
      bits[h] = KvHeadBits{static_cast<uint8_t>(w), static_cast<uint8_t>(w)};
      probes.push_back(kvq::compressed_mode(fmt("%zu.%zu@%d", h / c.kv_heads, h % c.kv_heads, w), c, probe_settings,
                                            std::move(bits)));
    }
  }
  kvq::RunOptions run;
  run.context = r->context;
  run.attention_cosine = false;
  run.threads = o.threads;
  run.on_probs = [&](uint32_t layer, uint32_t qh, uint32_t pos, const float* p, uint32_t len) {
    if (pos > 0) entropy[static_cast<size_t>(layer) * c.heads + qh].add(p, len);  // position 0 is trivially 0 bits
  };
  if (o.progress) run.progress = [&](uint64_t d, uint64_t t) { o.progress("sensitivity", d, t); };
  auto phase1 = kvq::run_modes(model, probes, ids, run);
  if (!phase1.ok()) return phase1.error();
  r->reference = phase1->reference;

  r->sensitivity.resize(n);
  for (size_t h = 0; h < n; ++h)
    for (size_t w = 0; w < 4; ++w) r->sensitivity[h][w] = phase1->modes[h * 4 + w].mean_kl();
  for (const kvcal::HeadEntropy& e : entropy) {
    r->query_shannon.push_back(e.mean_shannon());
    r->query_renyi2.push_back(e.mean_renyi2());
  }
  return Error::Ok;
}

// What the allocation works from: each KV head's entropies (its query heads combined), which
// heads stay exact (sinks), and the quantized heads' costs and Rényi entropies.
struct HeadClasses {
  std::vector<double> h_kv, h2_kv;
  std::vector<bool> exact;
  std::vector<std::array<double, 4>> cost;  // quantized heads only, non-increasing in width
  std::vector<double> h2_quantized;
};

// Combines phase 1's measurements per KV head, records how entropy ranks against 2-bit
// sensitivity, and sets the sink heads apart.
HeadClasses classify_heads(const CalibrationOptions& o, CalibrationResult* r) {
  const size_t n = static_cast<size_t>(r->layers) * r->kv_heads;
  const uint32_t group = r->heads / r->kv_heads;
  HeadClasses heads;
  heads.h_kv = kvcal::combine_gqa(r->query_shannon, group, o.combine);
  heads.h2_kv = kvcal::combine_gqa(r->query_renyi2, group, o.combine);
  {
    std::vector<double> s2(n);
    for (size_t h = 0; h < n; ++h) s2[h] = r->sensitivity[h][0];
    r->rank_corr_min = spearman(kvcal::combine_gqa(r->query_shannon, group, kvcal::GqaCombine::Min), s2);
    r->rank_corr_mean = spearman(kvcal::combine_gqa(r->query_shannon, group, kvcal::GqaCombine::Mean), s2);
  }
  heads.exact.resize(n);
  for (size_t h = 0; h < n; ++h) {
    heads.exact[h] = kvcal::classify_entropy(heads.h_kv[h]) == kvcal::HeadClass::Sink;
    if (heads.exact[h]) continue;
    std::array<double, 4> e = r->sensitivity[h];
    for (size_t w = 1; w < 4; ++w) e[w] = std::min(e[w], e[w - 1]);  // more bits never cost more than fewer
    heads.cost.push_back(e);
    heads.h2_quantized.push_back(heads.h2_kv[h]);
  }
  return heads;
}

// Phase 2: candidates at every average, evaluated as deployed (exact rows f16).
Error evaluate_candidates(const Model& model, const kvq::KvSettings& settings, const std::vector<int32_t>& ids,
                          const CalibrationOptions& o, const HeadClasses& heads, CalibrationResult* r) {
  const ModelConfig& c = model.config();
  std::vector<double> averages = o.averages;
  if (std::none_of(averages.begin(), averages.end(), [&](double a) { return std::fabs(a - o.average_bits) < 1e-6; }))
    averages.push_back(o.average_bits);
  std::sort(averages.begin(), averages.end());
  std::vector<kvq::KvMode> modes;
  std::vector<std::pair<size_t, size_t>> mode_of;  // (average index, candidate index) per mode
  for (double avg : averages) {
    AverageResult a;
    a.average_bits = avg;
    const size_t quantized = heads.cost.size();
    auto add = [&](const char* rule, const kvcal::Allocation& alloc) {
      if (quantized > 0 && alloc.bits.size() != quantized) return;
      const std::vector<uint8_t> bits = scatter(alloc, heads.exact);
      for (const CandidateResult& prior : a.candidates)
        if (prior.bits == bits) return;  // identical allocation: evaluated once, under the first rule
      CandidateResult cr;
      cr.rule = rule;
      cr.bits = bits;
      a.candidates.push_back(cr);
    };
    add("uniform", kvcal::allocate_uniform(quantized, avg));
    add("sensitivity", kvcal::allocate_by_sensitivity(heads.cost, avg));
    add("entropy", kvcal::allocate_entropy_rule(heads.h2_quantized, avg, o.entropy_alpha));
    for (size_t ci = 0; ci < a.candidates.size(); ++ci) {
      std::vector<KvHeadBits> bits;
      for (uint8_t b : a.candidates[ci].bits) bits.push_back(KvHeadBits{b, b});
      modes.push_back(
          kvq::compressed_mode(fmt("%g %s", avg, a.candidates[ci].rule.c_str()), c, settings, std::move(bits)));
      a.candidates[ci].bytes_per_token = modes.back().bytes_per_token();
      mode_of.emplace_back(r->averages.size(), ci);
    }
    r->averages.push_back(std::move(a));
  }
  kvq::RunOptions eval;
  eval.context = r->context;
  eval.attention_cosine = false;
  eval.threads = o.threads;
  if (o.progress) eval.progress = [&](uint64_t d, uint64_t t) { o.progress("evaluate", d, t); };
  auto phase2 = kvq::run_modes(model, modes, ids, eval);
  if (!phase2.ok()) return phase2.error();
  for (size_t m = 0; m < modes.size(); ++m)
    r->averages[mode_of[m].first].candidates[mode_of[m].second].stats = phase2->modes[m];
  return Error::Ok;
}

// Choose: the least KL(exact || mode) among candidates not worse than uniform in KL and in
// greedy agreement. KL, not the PPL of the observed tokens: on a few hundred calibration
// positions the PPL moves by +-1 % from noise alone (uniform 2.5 bits scored -1.05 % on
// bitllama2c-3M while its KL was twice the sensitivity allocation's), which made the rule
// keep uniform where the allocation clearly helps.
void choose_allocations(CalibrationResult* r) {
  for (AverageResult& a : r->averages) {
    const kvq::ModeStats& u = a.candidates[0].stats;
    a.chosen = 0;
    for (size_t ci = 1; ci < a.candidates.size(); ++ci) {
      const kvq::ModeStats& s = a.candidates[ci].stats;
      if (s.kl <= u.kl && s.agree >= u.agree && s.kl < a.candidates[a.chosen].stats.kl) a.chosen = ci;
    }
  }
}

// The profile: the chosen allocation at every average, and each KV head at the primary one.
void fill_profile(const CalibrationOptions& o, const ModelConfig& c, const HeadClasses& heads, CalibrationResult* r) {
  const size_t n = static_cast<size_t>(c.layers) * c.kv_heads;
  const uint32_t group = c.heads / c.kv_heads;
  KvProfileIR& p = r->profile;
  p.sink_tokens = o.sink_tokens;
  p.recent_window = o.recent_window;
  p.group_size = o.block_tokens;
  p.value_group = std::min(o.value_group, c.head_dim);
  p.average_bits = static_cast<float>(o.average_bits);
  p.sensitivity_widths.assign(kvcal::kWidths.begin(), kvcal::kWidths.end());
  p.sensitivity_tokens = r->tokens;
  const AverageResult* primary = nullptr;
  for (const AverageResult& a : r->averages) {
    KvAllocationIR ai;
    ai.average_bits = static_cast<float>(a.average_bits);
    ai.key_bits = a.candidates[a.chosen].bits;
    ai.value_bits = a.candidates[a.chosen].bits;
    ai.rule = a.candidates[a.chosen].rule;
    p.allocations.push_back(std::move(ai));
    if (std::fabs(a.average_bits - o.average_bits) < 1e-6) primary = &a;
  }
  for (size_t h = 0; h < n; ++h) {
    KvHeadProfileIR hp;
    hp.layer = static_cast<uint32_t>(h / c.kv_heads);
    hp.kv_head = static_cast<uint32_t>(h % c.kv_heads);
    hp.shannon_entropy = static_cast<float>(heads.h_kv[h]);
    hp.renyi2_entropy = static_cast<float>(heads.h2_kv[h]);
    hp.kv_class = static_cast<uint8_t>(kvcal::classify_entropy(heads.h_kv[h]));
    hp.sink = heads.exact[h];
    const uint8_t b = primary->candidates[primary->chosen].bits[h];
    hp.key_bits = hp.value_bits = heads.exact[h] ? 16 : b;
    for (double s : r->sensitivity[h]) hp.sensitivity.push_back(static_cast<float>(s));
    for (uint32_t q = 0; q < group; ++q)
      hp.query_shannon_entropy.push_back(
          static_cast<float>(r->query_shannon[hp.layer * c.heads + hp.kv_head * group + q]));
    p.heads.push_back(std::move(hp));
  }
}

}  // namespace

Result<CalibrationResult> calibrate_kv(const std::string& bundle_path, const CalibrationOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  ModelParams params;
  params.threads = 1;
  auto loaded = Model::load(bundle_path.c_str(), params);
  if (!loaded.ok()) return loaded.error();
  Model& model = **loaded;
  const ModelConfig& c = model.config();
  TERN_CHECK_OR_RETURN(c.heads % c.kv_heads == 0, Error::InvalidArgument, "heads %u not a multiple of KV heads %u",
                       c.heads, c.kv_heads);
  TERN_ASSIGN_OR_RETURN(const std::vector<int32_t> ids, calibration_tokens(model, o));

  CalibrationResult r;
  r.layers = c.layers;
  r.heads = c.heads;
  r.kv_heads = c.kv_heads;
  r.context = std::min<uint32_t>(c.max_context, static_cast<uint32_t>(ids.size()));
  r.tokens = static_cast<uint32_t>(ids.size());

  kvq::KvSettings settings;
  settings.sink_tokens = o.sink_tokens;
  settings.recent_window = o.recent_window;
  settings.block_tokens = o.block_tokens;
  settings.value_group = o.value_group;

  TERN_RETURN_IF_ERROR(measure_heads(model, settings, ids, o, &r));
  const HeadClasses heads = classify_heads(o, &r);
  TERN_RETURN_IF_ERROR(evaluate_candidates(model, settings, ids, o, heads, &r));
  choose_allocations(&r);
  fill_profile(o, c, heads, &r);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.profile.provenance =
      fmt("tern-convert --calibrate: text %s, %u positions (window %u), sensitivity KL at 2/3/4/8 "
          "bits, GQA %s, rules uniform/sensitivity/entropy(alpha %.2f), %.1f s",
          o.text_label.c_str(), r.tokens, r.context, o.combine == kvcal::GqaCombine::Min ? "min" : "mean",
          o.entropy_alpha, r.seconds);
  r.report = render_report(bundle_path, o, r);
  return r;
}

Error write_calibration_files(const std::string& bundle_path, const CalibrationResult& r, std::string* report_path,
                              std::string* heatmap_path) {
  const std::string report = bundle_path + ".kv-report.md";
  const std::string heatmap = bundle_path + ".kv-heatmap.png";
  FILE* f = std::fopen(report.c_str(), "wb");
  TERN_CHECK_OR_RETURN(f != nullptr, Error::IoError, "%s: cannot write", report.c_str());
  const bool ok = std::fwrite(r.report.data(), 1, r.report.size(), f) == r.report.size();
  TERN_CHECK_OR_RETURN(std::fclose(f) == 0 && ok, Error::IoError, "%s: write failed", report.c_str());
  double vmax = 0;
  for (double h : r.query_shannon) vmax = std::max(vmax, h);
  // Labelled picture (PNG and SVG): the model and calibration text in the title, each KV
  // head's class and allocated bits beside its row.
  KvHeatmap map;
  const size_t slash = bundle_path.find_last_of('/');
  const std::string model = slash == std::string::npos ? bundle_path : bundle_path.substr(slash + 1);
  const std::string& prov = r.profile.provenance;
  const size_t text_at = prov.find("text ");
  std::string text =
      text_at == std::string::npos ? prov : prov.substr(text_at + 5, prov.find(", ", text_at) - text_at - 5);
  if (const size_t cut = text.find_last_of('/'); cut != std::string::npos) text = text.substr(cut + 1);
  map.title = model + ": attention entropy per query head";
  map.subtitle = "calibration text: " + text + ", " + std::to_string(r.tokens) + " positions; sinks " +
                 std::to_string(r.profile.sink_tokens) + ", exact window " + std::to_string(r.profile.recent_window);
  map.values = r.query_shannon;
  map.layers = r.layers;
  map.query_heads = r.heads;
  map.kv_heads = r.kv_heads;
  map.vmin = 0.0;
  map.vmax = std::max(1.0, vmax);
  map.scale_label = "Shannon entropy of the query head's attention (bits)";
  char avg[128];
  std::snprintf(avg, sizeof avg, "class, key/value bits at %g average bits (adaptive:%g)",
                static_cast<double>(r.profile.average_bits), static_cast<double>(r.profile.average_bits));
  map.notes_label = avg;
  map.kv_notes.assign(static_cast<size_t>(r.layers) * r.kv_heads, "");
  for (const KvHeadProfileIR& h : r.profile.heads) {
    if (h.layer >= r.layers || h.kv_head >= r.kv_heads) continue;
    std::string note = kvcal::to_string(static_cast<kvcal::HeadClass>(h.kv_class));
    note += h.sink ? " exact" : " " + std::to_string(h.key_bits) + "/" + std::to_string(h.value_bits);
    map.kv_notes[static_cast<size_t>(h.layer) * r.kv_heads + h.kv_head] = note;
  }
  std::string error;
  TERN_CHECK_OR_RETURN(write_kv_heatmap(map, heatmap, bundle_path + ".kv-heatmap.svg", &error), Error::IoError,
                       "%s: %s", heatmap.c_str(), error.c_str());
  if (report_path) *report_path = report;
  if (heatmap_path) *heatmap_path = heatmap;
  return Error::Ok;
}

}  // namespace tern::convert
