// KV calibration of a written bundle (tern-convert --calibrate): runs the runtime's own
// forward pass over calibration text, measures each query head's attention entropy (exact
// f32 dense cache) and each KV head's sensitivity (KL of the next-token distribution when
// that head alone is quantized at 2/3/4/8 bits), then allocates widths at several averages
// and keeps, at each average, the allocation that is not worse than uniform on the
// calibration text (mean KL of the next-token distribution and greedy agreement), else uniform.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "converter/calibration/kv_calibration.h"
#include "converter/calibration/kv_quality.h"
#include "converter/writer/bundle_writer.h"
#include "platform/error.h"

namespace tern::convert {

struct CalibrationOptions {
  std::string text;                     // empty: kBuiltinCalibrationText
  std::string text_label = "built-in";  // for the profile's provenance
  uint32_t tokens = 512;                // calibration positions (windows of the model's context)
  double average_bits = 4.0;            // the primary allocation (KvHeadProfile key/value bits)
  std::vector<double> averages = {2.0, 2.5, 3.0, 3.5, 4.0, 6.0, 8.0};
  uint32_t sink_tokens = 4;
  uint32_t recent_window = 32;
  uint32_t block_tokens = 32;
  uint32_t value_group = 32;
  kvcal::GqaCombine combine = kvcal::GqaCombine::Min;
  double entropy_alpha = 0.25;
  uint32_t threads =
      1;  // forward passes of different modes run in parallel         // the seeds' rule b = avg + alpha (H2_avg - H2)
  std::function<void(const char* step, uint64_t done, uint64_t total)> progress;
};

struct CandidateResult {
  std::string rule;           // "uniform", "sensitivity", "entropy"
  std::vector<uint8_t> bits;  // per head, 0 = exact
  kvq::ModeStats stats;       // on the calibration text, vs the exact f32 run
  double bytes_per_token = 0;
};

struct AverageResult {
  double average_bits = 0;
  std::vector<CandidateResult> candidates;  // uniform first
  size_t chosen = 0;                        // index into candidates
};

struct CalibrationResult {
  KvProfileIR profile;
  uint32_t layers = 0, heads = 0, kv_heads = 0;
  std::vector<double> query_shannon, query_renyi2;  // [layer][query head]
  std::vector<std::array<double, 4>> sensitivity;   // [layer][kv head], kvcal::kWidths columns
  std::vector<AverageResult> averages;
  kvq::ModeStats reference;
  uint32_t tokens = 0, context = 0;
  double rank_corr_min = 0, rank_corr_mean = 0;  // Spearman(combined H, 2-bit sensitivity)
  double seconds = 0;
  std::string report;  // markdown
};

// Loads the bundle at `bundle_path` and calibrates it. The caller writes result.profile
// into the bundle (BundleContents::kv_profile) and rewrites it.
Result<CalibrationResult> calibrate_kv(const std::string& bundle_path, const CalibrationOptions& options);

// BUNDLE.kv-report.md and BUNDLE.kv-heatmap.png (layers x query heads, Shannon entropy).
Error write_calibration_files(const std::string& bundle_path, const CalibrationResult& result, std::string* report_path,
                              std::string* heatmap_path);

}  // namespace tern::convert
