// Writes a layers x heads grid of values as a PNG heatmap (libpng): each cell a square
// of `cell_pixels`, coloured on a three-stop scale from kHeatmapLow (vmin) through
// kHeatmapMid to kHeatmapHigh (vmax), linear in between; NaN cells are kHeatmapMissing.
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

// values: rows x cols, row-major (row = layer, column = head). Returns false and fills
// `error` when the file cannot be written.
bool write_heatmap_png(const std::string& path, const std::vector<double>& values, uint32_t rows, uint32_t cols,
                       double vmin, double vmax, uint32_t cell_pixels, std::string* error);

}  // namespace tern
