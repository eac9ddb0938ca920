#include "converter/report/chart.h"

#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "converter/report/font5x7.h"

namespace tern::chart {

int text_width(const std::string& text, int scale) {
  return text.empty() ? 0 : (static_cast<int>(text.size()) * 6 - 1) * scale;
}

std::string ascii_text(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out += static_cast<char>(c), ++i;
      continue;
    }
    size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    const std::string seq = s.substr(i, len);
    if (seq == "\xCE\x94")
      out += "D";  // Δ
    else if (seq == "\xC2\xB1")
      out += "+/-";  // ±
    else if (seq == "\xE2\x80\x96")
      out += "||";  // ‖
    else if (seq == "\xE2\x80\x93" || seq == "\xE2\x80\x94")
      out += "-";
    else
      out += "?";
    i += len;
  }
  return out;
}

namespace {

struct Raster {
  int w, h;
  std::vector<uint8_t> px;
  void set(int x, int y, const Rgb& c) {
    if (x < 0 || y < 0 || x >= w || y >= h) return;
    uint8_t* p = &px[(static_cast<size_t>(y) * w + x) * 3];
    p[0] = c[0], p[1] = c[1], p[2] = c[2];
  }
};

int text_left(const Text& t, int width) {
  return t.anchor == Anchor::Start ? t.x : t.anchor == Anchor::Middle ? t.x - width / 2 : t.x - width;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string hex(const Rgb& c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c[0], c[1], c[2]);
  return buf;
}

}  // namespace

bool write_png(const Canvas& canvas, const std::string& path, std::string* error) {
  if (canvas.width <= 0 || canvas.height <= 0) {
    if (error) *error = "picture: empty canvas";
    return false;
  }
  Raster r{canvas.width, canvas.height, std::vector<uint8_t>(static_cast<size_t>(canvas.width) * canvas.height * 3)};
  for (int y = 0; y < r.h; ++y)
    for (int x = 0; x < r.w; ++x) r.set(x, y, canvas.background);
  for (const Rect& rc : canvas.rects)
    for (int y = rc.y; y < rc.y + rc.h; ++y)
      for (int x = rc.x; x < rc.x + rc.w; ++x) r.set(x, y, rc.fill);
  for (const Line& l : canvas.lines) {
    // Bresenham.
    int x = l.x0, y = l.y0;
    const int dx = std::abs(l.x1 - l.x0), dy = -std::abs(l.y1 - l.y0);
    const int sx = l.x0 < l.x1 ? 1 : -1, sy = l.y0 < l.y1 ? 1 : -1;
    int err = dx + dy;
    for (;;) {
      r.set(x, y, l.colour);
      if (x == l.x1 && y == l.y1) break;
      const int e2 = 2 * err;
      if (e2 >= dy) err += dy, x += sx;
      if (e2 <= dx) err += dx, y += sy;
    }
  }
  for (const Text& t : canvas.texts) {
    const std::string s = ascii_text(t.text);
    int x = text_left(t, text_width(s, t.scale));
    for (char c : s) {
      const Glyph* g = glyph_for(c);
      for (int row = 0; row < 7; ++row)
        for (int col = 0; col < 5; ++col)
          if (g->rows[row] & (0x10 >> col))
            for (int dy = 0; dy < t.scale; ++dy)
              for (int dx = 0; dx < t.scale; ++dx) r.set(x + col * t.scale + dx, t.y + row * t.scale + dy, t.colour);
      x += 6 * t.scale;
    }
  }
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!file) {
    if (error) *error = "picture: cannot open " + path;
    return false;
  }
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info) {
    png_destroy_write_struct(&png, &info);
    if (error) *error = "picture: libpng initialization failed";
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    if (error) *error = "picture: libpng failed writing " + path;
    return false;
  }
  png_init_io(png, file.get());
  png_set_IHDR(png, info, static_cast<png_uint_32>(r.w), static_cast<png_uint_32>(r.h), 8, PNG_COLOR_TYPE_RGB,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < r.h; ++y) png_write_row(png, &r.px[static_cast<size_t>(y) * r.w * 3]);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

bool write_svg(const Canvas& canvas, const std::string& path, std::string* error) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) {
    if (error) *error = "picture: cannot open " + path;
    return false;
  }
  std::fprintf(f.get(),
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"monospace\">\n<rect width=\"%d\" height=\"%d\" fill=\"%s\"/>\n",
               canvas.width, canvas.height, canvas.width, canvas.height, canvas.width, canvas.height,
               hex(canvas.background).c_str());
  for (const Rect& r : canvas.rects)
    std::fprintf(f.get(), "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n", r.x, r.y, r.w, r.h,
                 hex(r.fill).c_str());
  for (const Line& l : canvas.lines)
    std::fprintf(f.get(), "<line x1=\"%d.5\" y1=\"%d.5\" x2=\"%d.5\" y2=\"%d.5\" stroke=\"%s\"/>\n", l.x0, l.y0, l.x1,
                 l.y1, hex(l.colour).c_str());
  for (const Text& t : canvas.texts) {
    const char* anchor = t.anchor == Anchor::Start ? "start" : t.anchor == Anchor::Middle ? "middle" : "end";
    // Baseline at the bottom of the 7-row glyph box; the font size fills the box like the PNG's.
    std::fprintf(f.get(), "<text x=\"%d\" y=\"%d\" font-size=\"%d\" fill=\"%s\" text-anchor=\"%s\">%s</text>\n", t.x,
                 t.y + 7 * t.scale, 10 * t.scale, hex(t.colour).c_str(), anchor, xml_escape(t.text).c_str());
  }
  std::fprintf(f.get(), "</svg>\n");
  if (std::ferror(f.get())) {
    if (error) *error = "picture: write failed: " + path;
    return false;
  }
  return true;
}

bool write_picture(const Canvas& canvas, const std::string& path, std::string* error) {
  auto ends = [&](const char* ext) {
    const std::string e(ext);
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends(".svg")) return write_svg(canvas, path, error);
  if (ends(".png")) return write_png(canvas, path, error);
  if (error) *error = "picture: " + path + ": the name must end in .svg or .png";
  return false;
}

double tick_step(double span, int ticks) {
  if (!(span > 0) || ticks <= 0) return 1.0;
  const double raw = span / ticks;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * p) return m * p;
  return 10.0 * p;
}

namespace {

std::string format_tick(double v, double step) {
  char buf[32];
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  std::snprintf(buf, sizeof buf, "%.*f", decimals, std::fabs(v) < step * 1e-6 ? 0.0 : v);
  return buf;
}

}  // namespace

void mark_pareto_front(std::vector<ParetoPoint>& points) {
  for (ParetoPoint& p : points) {
    p.front = true;
    for (const ParetoPoint& q : points)
      if (&q != &p && q.bytes_per_token <= p.bytes_per_token && q.delta_ppl_percent < p.delta_ppl_percent)
        p.front = false;
  }
}

Canvas pareto_chart(const std::string& title, const std::string& subtitle, const std::vector<ParetoPoint>& points) {
  const Rgb ink{30, 30, 30}, grid{225, 225, 225}, axis{90, 90, 90}, front{200, 60, 40}, other{40, 90, 170};
  Canvas c;
  c.width = 760, c.height = 520;
  const int left = 80, right = c.width - 170, top = 70, bottom = c.height - 70;
  c.texts.push_back({left, 14, title, 2, ink, Anchor::Start});
  c.texts.push_back({left, 36, subtitle, 1, ink, Anchor::Start});
  double x_max = 1, y_min = 0, y_max = 0;
  for (const ParetoPoint& p : points) {
    x_max = std::max(x_max, p.bytes_per_token);
    y_min = std::min(y_min, p.delta_ppl_percent - p.se_percent);
    y_max = std::max(y_max, p.delta_ppl_percent + p.se_percent);
  }
  if (y_max - y_min < 1e-3) y_max = y_min + 1e-3;
  const double xs = tick_step(x_max, 6), ys = tick_step(y_max - y_min, 6);
  x_max = std::ceil(x_max * 1.05 / xs) * xs;
  y_min = std::floor(y_min / ys) * ys;
  y_max = std::ceil(y_max / ys) * ys;
  if (y_max <= y_min) y_max = y_min + ys;
  auto X = [&](double v) { return left + static_cast<int>(std::lround((right - left) * v / x_max)); };
  auto Y = [&](double v) {
    return bottom - static_cast<int>(std::lround((bottom - top) * (v - y_min) / (y_max - y_min)));
  };
  for (double v = 0; v <= x_max + xs * 1e-6; v += xs) {
    c.lines.push_back({X(v), top, X(v), bottom, grid});
    c.texts.push_back({X(v), bottom + 8, format_tick(v, xs), 1, ink, Anchor::Middle});
  }
  for (double v = y_min; v <= y_max + ys * 1e-6; v += ys) {
    c.lines.push_back({left, Y(v), right, Y(v), grid});
    c.texts.push_back({left - 6, Y(v) - 3, format_tick(v, ys), 1, ink, Anchor::End});
  }
  c.lines.push_back({left, Y(0), right, Y(0), axis});  // exact model: ΔPPL 0
  c.lines.push_back({left, top, left, bottom, axis});
  c.lines.push_back({left, bottom, right, bottom, axis});
  c.texts.push_back(
      {(left + right) / 2, bottom + 26, "KV bytes per token (all layers and heads)", 1, ink, Anchor::Middle});
  c.texts.push_back({left - 6, top - 16, "ΔPPL vs exact KV (%), bars ± 1 s.e.", 1, ink, Anchor::Start});
  std::vector<const ParetoPoint*> on_front;
  for (const ParetoPoint& p : points)
    if (p.front) on_front.push_back(&p);
  std::sort(on_front.begin(), on_front.end(),
            [](const ParetoPoint* a, const ParetoPoint* b) { return a->bytes_per_token < b->bytes_per_token; });
  for (size_t i = 1; i < on_front.size(); ++i)
    c.lines.push_back({X(on_front[i - 1]->bytes_per_token), Y(on_front[i - 1]->delta_ppl_percent),
                       X(on_front[i]->bytes_per_token), Y(on_front[i]->delta_ppl_percent), front});
  // Labels right of their points, moved up or down past labels already placed (modes at
  // equal bytes and close ΔPPL would print over each other).
  struct Box {
    int x0, y0, x1, y1;
  };
  std::vector<Box> placed;
  for (const ParetoPoint& p : points) {
    const Rgb col = p.front ? front : other;
    const int x = X(p.bytes_per_token), y = Y(p.delta_ppl_percent);
    c.lines.push_back({x, Y(p.delta_ppl_percent - p.se_percent), x, Y(p.delta_ppl_percent + p.se_percent), col});
    c.rects.push_back({x - 3, y - 3, 7, 7, col});
    const int w = text_width(ascii_text(p.name), 1);
    int ty = y - 4;
    for (int k = 0; k < 40; ++k) {
      const int cand = y - 4 + ((k + 1) / 2) * 10 * (k % 2 ? -1 : 1);
      bool clear = true;
      for (const Box& b : placed)
        if (x + 7 < b.x1 && b.x0 < x + 7 + w && cand < b.y1 && b.y0 < cand + 8) clear = false;
      if (clear) {
        ty = cand;
        break;
      }
    }
    placed.push_back({x + 7, ty, x + 7 + w, ty + 8});
    if (ty != y - 4) c.lines.push_back({x + 3, y, x + 6, ty + 3, col});
    c.texts.push_back({x + 7, ty, p.name, 1, col, Anchor::Start});
  }
  // Legend.
  c.rects.push_back({right + 16, top, 7, 7, front});
  c.texts.push_back({right + 28, top, "Pareto front", 1, ink, Anchor::Start});
  c.rects.push_back({right + 16, top + 16, 7, 7, other});
  c.texts.push_back({right + 28, top + 16, "dominated", 1, ink, Anchor::Start});
  return c;
}

}  // namespace tern::chart
