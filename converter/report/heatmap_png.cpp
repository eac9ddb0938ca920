#include "converter/report/heatmap_png.h"

#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "converter/report/chart.h"

namespace tern {

Rgb heatmap_colour(double value, double vmin, double vmax) {
  if (std::isnan(value)) return kHeatmapMissing;
  double t = vmax > vmin ? (value - vmin) / (vmax - vmin) : 0.0;
  t = t < 0 ? 0 : (t > 1 ? 1 : t);
  const Rgb& a = t < 0.5 ? kHeatmapLow : kHeatmapMid;
  const Rgb& b = t < 0.5 ? kHeatmapMid : kHeatmapHigh;
  const double u = t < 0.5 ? t * 2 : (t - 0.5) * 2;
  Rgb out;
  for (int i = 0; i < 3; ++i) out[i] = static_cast<uint8_t>(std::lround(a[i] + (b[i] - a[i]) * u));
  return out;
}

bool write_kv_heatmap(const KvHeatmap& h, const std::string& png_path, const std::string& svg_path,
                      std::string* error) {
  const size_t cells = static_cast<size_t>(h.layers) * h.query_heads;
  if (h.layers == 0 || h.query_heads == 0 || h.kv_heads == 0 || h.query_heads % h.kv_heads != 0 ||
      h.values.size() != cells ||
      (!h.kv_notes.empty() && h.kv_notes.size() != static_cast<size_t>(h.layers) * h.kv_heads)) {
    if (error) *error = "heatmap: the grid, head counts and notes do not match";
    return false;
  }
  using chart::Anchor;
  const chart::Rgb ink{30, 30, 30}, light{255, 255, 255};
  const int cell = 30, gap = 4, margin = 16;
  const uint32_t group = h.query_heads / h.kv_heads;
  chart::Canvas c;
  const int left = margin + 30, top = 96;
  auto cell_x = [&](uint32_t q) { return left + static_cast<int>(q) * cell + static_cast<int>(q / group) * gap; };
  const int grid_right = cell_x(h.query_heads - 1) + cell;
  c.texts.push_back({margin, margin, h.title, 2, ink, Anchor::Start});
  c.texts.push_back({margin, margin + 22, h.subtitle, 1, ink, Anchor::Start});
  for (uint32_t k = 0; k < h.kv_heads; ++k) {
    const int x0 = cell_x(k * group), x1 = cell_x((k + 1) * group - 1) + cell;
    c.texts.push_back({(x0 + x1) / 2, top - 34, "KV" + std::to_string(k), 1, ink, Anchor::Middle});
    c.lines.push_back({x0, top - 24, x1 - 1, top - 24, ink});
  }
  for (uint32_t q = 0; q < h.query_heads; ++q)
    c.texts.push_back({cell_x(q) + cell / 2, top - 16, "H" + std::to_string(q), 1, ink, Anchor::Middle});
  int notes_width = 0;
  const int notes_x = grid_right + 14;
  if (!h.kv_notes.empty()) c.texts.push_back({notes_x, top - 16, h.notes_label, 1, ink, Anchor::Start});
  notes_width = chart::text_width(h.notes_label, 1);
  for (uint32_t l = 0; l < h.layers; ++l) {
    const int y = top + static_cast<int>(l) * cell;
    c.texts.push_back({left - 8, y + cell / 2 - 3, "L" + std::to_string(l), 1, ink, Anchor::End});
    for (uint32_t q = 0; q < h.query_heads; ++q) {
      const double v = h.values[static_cast<size_t>(l) * h.query_heads + q];
      const Rgb fill = heatmap_colour(v, h.vmin, h.vmax);
      c.rects.push_back({cell_x(q), y, cell - 1, cell - 1, fill});
      char buf[16];
      std::snprintf(buf, sizeof buf, "%.1f", v);
      const bool dark = 0.299 * fill[0] + 0.587 * fill[1] + 0.114 * fill[2] < 140;
      c.texts.push_back(
          {cell_x(q) + cell / 2, y + cell / 2 - 4, std::isnan(v) ? "-" : buf, 1, dark ? light : ink, Anchor::Middle});
    }
    if (!h.kv_notes.empty()) {
      std::string line;
      for (uint32_t k = 0; k < h.kv_heads; ++k)
        line +=
            (k ? "   " : "") + ("KV" + std::to_string(k) + " " + h.kv_notes[static_cast<size_t>(l) * h.kv_heads + k]);
      c.texts.push_back({notes_x, y + cell / 2 - 3, line, 1, ink, Anchor::Start});
      notes_width = std::max(notes_width, chart::text_width(line, 1));
    }
  }
  // The colour scale: a bar from vmin to vmax with ticks in bits.
  const int bar_y = top + static_cast<int>(h.layers) * cell + 26, bar_h = 14;
  const int bar_w = std::max(240, grid_right - left);
  for (int x = 0; x < bar_w; ++x)
    c.rects.push_back(
        {left + x, bar_y, 1, bar_h, heatmap_colour(h.vmin + (h.vmax - h.vmin) * x / (bar_w - 1), h.vmin, h.vmax)});
  const double step = chart::tick_step(h.vmax - h.vmin, 5);
  for (double v = std::ceil(h.vmin / step) * step; v <= h.vmax + step * 1e-6; v += step) {
    const int x = left + static_cast<int>(std::lround((bar_w - 1) * (v - h.vmin) / (h.vmax - h.vmin)));
    c.lines.push_back({x, bar_y + bar_h, x, bar_y + bar_h + 4, ink});
    char buf[16];
    std::snprintf(buf, sizeof buf, "%g", std::round(v * 1000) / 1000);
    c.texts.push_back({x, bar_y + bar_h + 8, buf, 1, ink, Anchor::Middle});
  }
  c.texts.push_back({left, bar_y + bar_h + 24, h.scale_label, 1, ink, Anchor::Start});
  c.width = std::max(
      {notes_x + notes_width + margin, left + bar_w + margin, margin + chart::text_width(h.title, 2) + margin,
       margin + chart::text_width(h.subtitle, 1) + margin, margin + chart::text_width(h.scale_label, 1) + left});
  c.height = bar_y + bar_h + 24 + 7 + margin;
  if (!png_path.empty() && !chart::write_png(c, png_path, error)) return false;
  if (!svg_path.empty() && !chart::write_svg(c, svg_path, error)) return false;
  return true;
}

}  // namespace tern
