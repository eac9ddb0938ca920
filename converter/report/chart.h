// Pictures for people: a canvas of rectangles, lines and text, written as PNG (libpng, text
// in the project's 5x7 font, converter/report/font5x7.h) or as SVG (the same shapes, text as text).
// Used for the KV heatmap (heatmap_png.h) and tern-eval's Pareto plot.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tern::chart {

using Rgb = std::array<uint8_t, 3>;
enum class Anchor { Start, Middle, End };

struct Rect {
  int x = 0, y = 0, w = 0, h = 0;
  Rgb fill{};
};
struct Line {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  Rgb colour{};
};
// Text whose glyph box (7 * scale pixels high) starts at y; x is its start, middle or end.
struct Text {
  int x = 0, y = 0;
  std::string text;
  int scale = 1;
  Rgb colour{};
  Anchor anchor = Anchor::Start;
};

// Drawn in order: rectangles, then lines, then text.
struct Canvas {
  int width = 0, height = 0;
  Rgb background{255, 255, 255};
  std::vector<Rect> rects;
  std::vector<Line> lines;
  std::vector<Text> texts;
};

// Pixels a text takes in the PNG font: 6 per character (5 + 1 spacing) less the last gap.
int text_width(const std::string& text, int scale);
// Text for the PNG font: "Δ" -> "D", "±" -> "+/-", "‖" -> "||", other non-ASCII -> '?'.
std::string ascii_text(const std::string& utf8);

bool write_png(const Canvas& canvas, const std::string& path, std::string* error);
bool write_svg(const Canvas& canvas, const std::string& path, std::string* error);
// By the path's extension: ".svg" or ".png"; false with a message otherwise.
bool write_picture(const Canvas& canvas, const std::string& path, std::string* error);

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `ticks` steps over span.
double tick_step(double span, int ticks);

// tern-eval --plot: ΔPPL (%) against KV bytes per token, one point per mode with its
// standard error as a bar, the Pareto front joined.
struct ParetoPoint {
  std::string name;
  double bytes_per_token = 0, delta_ppl_percent = 0, se_percent = 0;
  bool front = false;
};
// Sets `front` on the points no other point beats: at most as many bytes and a lower ΔPPL.
void mark_pareto_front(std::vector<ParetoPoint>& points);
Canvas pareto_chart(const std::string& title, const std::string& subtitle, const std::vector<ParetoPoint>& points);

}  // namespace tern::chart
