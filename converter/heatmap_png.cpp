#include "converter/heatmap_png.h"

#include <png.h>

#include <cmath>
#include <cstdio>
#include <memory>

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

bool write_heatmap_png(const std::string& path, const std::vector<double>& values, uint32_t rows, uint32_t cols,
                       double vmin, double vmax, uint32_t cell_pixels, std::string* error) {
  if (rows == 0 || cols == 0 || cell_pixels == 0 || values.size() != static_cast<size_t>(rows) * cols) {
    if (error) *error = "heatmap: empty grid or value count does not match rows x cols";
    return false;
  }
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!file) {
    if (error) *error = "heatmap: cannot open " + path;
    return false;
  }
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info) {
    png_destroy_write_struct(&png, &info);
    if (error) *error = "heatmap: libpng initialization failed";
    return false;
  }
  const uint32_t width = cols * cell_pixels, height = rows * cell_pixels;
  std::vector<uint8_t> line(static_cast<size_t>(width) * 3);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    if (error) *error = "heatmap: libpng failed writing " + path;
    return false;
  }
  png_init_io(png, file.get());
  png_set_IHDR(png, info, width, height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (uint32_t y = 0; y < height; ++y) {
    const uint32_t r = y / cell_pixels;
    for (uint32_t x = 0; x < width; ++x) {
      const Rgb c = heatmap_colour(values[static_cast<size_t>(r) * cols + x / cell_pixels], vmin, vmax);
      for (int i = 0; i < 3; ++i) line[static_cast<size_t>(x) * 3 + i] = c[i];
    }
    png_write_row(png, line.data());
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

}  // namespace tern
