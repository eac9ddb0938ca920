// KV-mode quality measurement on a loaded model (host side), shared by the calibrator
// (tern-convert --calibrate) and tern-eval: teacher-forced next-token prediction through
// the runtime's own forward pass, a reference run with an exact f32 dense cache and any
// number of KV modes run in lockstep with it, one token at a time, so per-position
// comparisons (greedy agreement, KL, attention-output cosine) need no stored history.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "platform/error.h"
#include "runtime/engine/model.h"
#include "runtime/kv/kv_cache_spec.h"

namespace tern::kvq {

// Cache settings for uniform modes, and for adaptive ones when the bundle does not say.
struct KvSettings {
  uint32_t sink_tokens = 4;
  uint32_t recent_window = 32;
  uint32_t block_tokens = 32;
  uint32_t value_group = 32;
  KvType exact_type = KvType::F16;  // exact rows of compressed modes (sinks, window, exact heads)
};

// One KV configuration to evaluate: a cache spec like a session's, plus the per-head widths
// its profile points at (set from `bits` whenever the spec is used, since modes get copied).
struct KvMode {
  std::string name;
  KvCacheSpec spec;
  std::vector<KvHeadBits> bits;   // per (layer, kv head) when non-empty
  const KvCacheSpec& resolved();  // spec with profile.head_bits = bits (when bits are given)

  // Marginal bytes per position over all layers and heads, and per stored element (bits).
  double bytes_per_token() const;
  double bits_per_element() const;
};

// A compressed mode with explicit per-head bits (layer-major, {0,0} = exact head).
KvMode compressed_mode(const std::string& name, const ModelConfig& config, const KvSettings& settings,
                       std::vector<KvHeadBits> bits);
// Settings the bundle's calibrated profile records (window, sinks, groups), else `fallback`.
KvSettings settings_from_model(const Model& model, const KvSettings& fallback);
// A mode by its name: parse_kv_mode names ("f32", "fp16", "q4", "k4v2", "adaptive:B", the
// last via kv_profile_for_average on the bundle's profile), without eviction (each window is
// a fresh cache), plus "uniform:B": every head the
// adaptive:B allocation quantizes at the uniform mix of widths averaging B (same sink heads,
// so the same bytes). InvalidArgument / NotFound with a message otherwise.
Result<KvMode> mode_by_name(const Model& model, const std::string& name, const KvSettings& settings);

struct ModeStats {
  double nll = 0;     // summed over predictions (nats)
  double kl = 0;      // summed KL(reference || mode) of the next-token distributions
  double cosine = 0;  // summed cosine of attention outputs (per query head, layer, position)
  uint64_t cosine_rows = 0;
  uint64_t predictions = 0;
  uint64_t agree = 0;  // argmax equal to the reference's
  // Per-position NLL minus the reference's at the same position: the paired difference
  // behind ΔPPL, so its standard error says whether two modes' ΔPPL differ beyond noise.
  double dnll = 0, dnll_sq = 0;
  // With RunOptions::per_position: each prediction's NLL and whether its argmax matched, in
  // order, so two modes can be compared position by position (kvq::compare).
  std::vector<float> position_nll;
  std::vector<uint8_t> position_agree;
  double ppl() const;
  double delta_ppl_percent() const;     // 100 (exp(mean dnll) - 1) = 100 (ppl / ppl_exact - 1)
  double delta_ppl_se_percent() const;  // its standard error (delta method)
  double mean_kl() const { return predictions ? kl / static_cast<double>(predictions) : 0.0; }
  double agreement() const { return predictions ? static_cast<double>(agree) / static_cast<double>(predictions) : 0.0; }
  double mean_cosine() const { return cosine_rows ? cosine / static_cast<double>(cosine_rows) : 1.0; }
};

struct RunOptions {
  uint32_t context = 0;      // window length (0: the model's context); each window starts a fresh cache
  uint32_t max_windows = 0;  // 0: every complete window, plus the remainder when it is >= 2 tokens
  bool attention_cosine = true;
  bool per_position = false;  // fill ModeStats::position_nll / position_agree
  uint32_t threads = 1;       // modes run on up to this many threads (the reference first, every position)
  // Per-position, per-query-head attention rows of the reference run (dense f32 cache).
  std::function<void(uint32_t layer, uint32_t query_head, uint32_t pos, const float* probs, uint32_t len)> on_probs;
  // Called after every position with (done, total) forward passes.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct RunResult {
  ModeStats reference;  // the exact f32 run (agreement 100 %, KL 0)
  std::vector<ModeStats> modes;
};

// Mode a against mode b over the same positions (both run with per_position): the PPL ratio
// a/b as a percentage change, its standard error from the paired per-position NLL differences,
// and the greedy agreements' difference (points) with its standard error.
struct Comparison {
  double delta_ppl_percent = 0, delta_ppl_se_percent = 0;
  double delta_agreement_points = 0, delta_agreement_se_points = 0;
  uint64_t positions = 0;
};
Result<Comparison> compare(const ModeStats& a, const ModeStats& b);

// Runs the reference and every mode over `ids` in windows. Fails if a cache cannot be built.
Result<RunResult> run_modes(const Model& model, std::vector<KvMode>& modes, const std::vector<int32_t>& ids,
                            const RunOptions& options);

// Long streams: one session per mode through the whole text, token by token, with a KV
// cache of fixed capacity that evicts (StreamingLLM: sinks + recent window kept, the oldest
// middle block dropped), so positions far past the capacity are scored as a session sees
// them. Every mode is compared with two exact references over the same tokens and the same
// (absolute) positions:
//  - the exact stream under the same eviction: an f32 cache of exact heads with the mode's
//    sinks, window, block length and capacity (what quantization alone costs);
//  - the full-context exact stream: an f32 cache of exact heads holding the model's whole
//    context, evicting the same way past it (what quantization plus a smaller cache costs).
// Exact modes ("f32", "fp16") become caches of exact heads with eviction on.
struct StreamOptions {
  uint32_t capacity = 0;      // positions every mode holds (0: the model's context); rounded to the ladder
  uint64_t budget_bytes = 0;  // instead: each mode holds the most positions whose cache fits (<= context)
  uint32_t threads = 1;
  uint32_t full_context = 0;  // the full-context reference's capacity (0: the model's context)
  std::function<void(uint64_t done, uint64_t total)> progress;
};

// One stream, per prediction (position p predicts token p+1).
struct StreamTrace {
  std::string name;
  uint32_t capacity = 0;   // positions the cache holds
  size_t cache_bytes = 0;  // its arena bytes (kv_cache_arena_bytes)
  std::vector<float> nll;
  // Against the references (empty for the references themselves).
  std::vector<float> kl_same, kl_full;
  std::vector<uint8_t> agree_same, agree_full;
  // Where the tokens 0..p are after position p, averaged over (layer, kv head): exact rows
  // (sinks, window, middle blocks of exact heads), quantized middle rows, or evicted.
  std::vector<float> exact_fraction, compressed_fraction, evicted_fraction;
  size_t same_reference = 0;  // index into StreamResult::same
};

struct StreamResult {
  StreamTrace full;               // full-context exact stream
  std::vector<StreamTrace> same;  // exact streams under each distinct eviction layout of the modes
  std::vector<StreamTrace> modes;
};

Result<StreamResult> run_stream(const Model& model, std::vector<KvMode>& modes, const std::vector<int32_t>& ids,
                                const StreamOptions& options);

// Summary of predictions [begin, end) of a stream against a reference's NLL at the same
// positions: PPL, ΔPPL ± standard error (paired), and the mean KL / agreement records given.
struct StreamSummary {
  size_t begin = 0, end = 0;
  double ppl = 0, ppl_reference = 0;
  double delta_ppl_percent = 0, delta_ppl_se_percent = 0;
  double mean_kl = 0, agreement = 1;
  double exact_fraction = 1, compressed_fraction = 0, evicted_fraction = 0;  // at the last position
};
StreamSummary summarize(const StreamTrace& mode, const StreamTrace& reference, size_t begin, size_t end,
                        bool against_full);

// Text to ids with the bundle's tokenizer: BOS first; with bos_per_paragraph, a BOS before
// every blank-line-separated paragraph (TinyStories-style data). tail_bytes > 0 keeps only
// the end of the text, from a word boundary.
Result<std::vector<int32_t>> tokenize_text(Model& model, std::string text, bool bos_per_paragraph,
                                           size_t tail_bytes = 0);

}  // namespace tern::kvq
