// The KV calibration heatmap (PNG through converter/chart, and SVG). Cells are coloured on a
// three-stop scale from kHeatmapLow (vmin) through kHeatmapMid to kHeatmapHigh (vmax),
// linear in between; NaN cells are kHeatmapMissing.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tern {

using Rgb = std::array<uint8_t, 3>;
constexpr Rgb kHeatmapLow = {68, 1, 84};      // viridis start
constexpr Rgb kHeatmapMid = {33, 145, 140};   // viridis middle
constexpr Rgb kHeatmapHigh = {253, 231, 37};  // viridis end
constexpr Rgb kHeatmapMissing = {128, 128, 128};

Rgb heatmap_colour(double value, double vmin, double vmax);

// The KV calibration heatmap a person reads: a title (model, calibration text), layer labels
// (L0..) down the side, query-head labels (H0..) grouped under their KV heads (KV0..) across
// the top, each cell's entropy written in it, each layer's KV heads with their class and
// allocated key/value bits beside the row, and a colour scale in bits with ticks.
struct KvHeatmap {
  std::string title;           // e.g. "tiny-austen.tern: attention entropy per query head"
  std::string subtitle;        // e.g. the calibration text and positions
  std::vector<double> values;  // layers x query heads, row-major (bits)
  uint32_t layers = 0, query_heads = 0, kv_heads = 0;
  double vmin = 0, vmax = 1;
  std::string scale_label;            // under the colour bar, e.g. "Shannon entropy (bits)"
  std::vector<std::string> kv_notes;  // layers x kv_heads: "mixed 4/4" (class, key/value bits)
  std::string notes_label;            // what the notes are, e.g. "class, key/value bits at 4 avg bits"
};
// Writes `png_path` (5x7 bitmap text) and `svg_path` (the same picture, text as text); an
// empty path is skipped. False and `error` for a bad grid or an unwritable file.
bool write_kv_heatmap(const KvHeatmap& heatmap, const std::string& png_path, const std::string& svg_path,
                      std::string* error);

}  // namespace tern
