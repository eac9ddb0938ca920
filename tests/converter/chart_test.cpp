// The pictures a person reads: the KV heatmap's SVG names every layer, query head, KV head,
// each head's class and bits, the title and the colour scale's ticks; its PNG is the canvas'
// size, draws text and spans the colour scale; the 5x7 font has a distinct glyph per
// character; the Pareto front is the set no other point beats; the plot names every mode.
#include <gtest/gtest.h>
#include <png.h>

#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "converter/report/chart.h"
#include "converter/report/font5x7.h"
#include "converter/report/heatmap_png.h"
#include "tests/support/test_util.h"

namespace tern {
namespace {

struct Png {
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> rgb;
};

Png read_png(const std::string& path) {
  Png out;
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return out;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return Png{};
  }
  png_init_io(png, f.get());
  png_read_info(png, info);
  out.width = png_get_image_width(png, info);
  out.height = png_get_image_height(png, info);
  EXPECT_EQ(png_get_color_type(png, info), PNG_COLOR_TYPE_RGB);
  out.rgb.resize(size_t{out.width} * out.height * 3);
  for (uint32_t y = 0; y < out.height; ++y) png_read_row(png, &out.rgb[size_t{y} * out.width * 3], nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return out;
}

bool has_colour(const Png& p, const Rgb& c) {
  for (size_t i = 0; i + 2 < p.rgb.size(); i += 3)
    if (p.rgb[i] == c[0] && p.rgb[i + 1] == c[1] && p.rgb[i + 2] == c[2]) return true;
  return false;
}

TEST(Chart, KvHeatmapIsLabelled) {
  KvHeatmap h;
  h.title = "tiny.tern: attention entropy per query head";
  h.subtitle = "calibration text: story.txt, 64 positions";
  h.layers = 3, h.query_heads = 4, h.kv_heads = 2;
  h.values = {0.2, 1.0, 2.5, 3.9, 0.0, 4.0, 1.5, 2.0, 3.0, 3.3, 0.7, 1.1};
  h.vmin = 0, h.vmax = 4;
  h.scale_label = "Shannon entropy (bits)";
  h.notes_label = "class, key/value bits";
  h.kv_notes = {"sink exact", "mixed 4/4", "focused 8/8", "diffuse 2/2", "moderate 3/3", "mixed 4/2"};
  testing::TempFile png(".png"), svg(".svg");
  std::string error;
  ASSERT_TRUE(write_kv_heatmap(h, png.path(), svg.path(), &error)) << error;
  const std::string text = testing::read_file_text(svg.path());
  auto has = [&](const std::string& s) { return text.find(">" + s + "<") != std::string::npos; };
  EXPECT_TRUE(has(h.title));
  EXPECT_TRUE(has(h.subtitle));
  EXPECT_TRUE(has(h.scale_label));
  EXPECT_TRUE(has(h.notes_label));
  for (uint32_t l = 0; l < h.layers; ++l) {
    EXPECT_TRUE(has("L" + std::to_string(l))) << l;
    // Each layer's KV heads with their class and bits, on the row.
    EXPECT_TRUE(has("KV0 " + h.kv_notes[l * 2] + "   KV1 " + h.kv_notes[l * 2 + 1])) << l;
  }
  EXPECT_FALSE(has("L3"));
  for (uint32_t q = 0; q < h.query_heads; ++q) EXPECT_TRUE(has("H" + std::to_string(q))) << q;
  EXPECT_TRUE(has("KV0"));
  EXPECT_TRUE(has("KV1"));
  for (const char* tick : {"0", "1", "2", "3", "4"}) EXPECT_TRUE(has(tick)) << tick;
  // Every cell's value, printed in it.
  for (double v : h.values) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    EXPECT_TRUE(has(buf)) << buf;
  }
  const Png p = read_png(png.path());
  const std::string size = "width=\"" + std::to_string(p.width) + "\" height=\"" + std::to_string(p.height) + "\"";
  EXPECT_NE(text.find(size), std::string::npos) << "PNG and SVG are one canvas";
  EXPECT_GT(p.width, 300u);
  EXPECT_TRUE(has_colour(p, kHeatmapLow)) << "the scale starts at the low colour";
  EXPECT_TRUE(has_colour(p, kHeatmapHigh)) << "and ends at the high one";
  EXPECT_TRUE(has_colour(p, Rgb{30, 30, 30})) << "text is drawn";

  h.kv_notes.pop_back();
  EXPECT_FALSE(write_kv_heatmap(h, png.path(), "", &error));
  EXPECT_FALSE(error.empty());
}

TEST(Chart, FontHasADistinctGlyphPerCharacter) {
  std::set<std::vector<uint8_t>> shapes;
  std::set<char> chars;
  for (const chart::Glyph& g : chart::kFont5x7) {
    EXPECT_TRUE(chars.insert(g.c).second) << "twice: " << g.c;
    for (uint8_t row : g.rows) EXPECT_LT(row, 0x20) << g.c;
    EXPECT_TRUE(shapes.insert(std::vector<uint8_t>(g.rows, g.rows + 7)).second) << "same shape as another: " << g.c;
  }
  for (char c = '0'; c <= '9'; ++c) EXPECT_EQ(chart::glyph_for(c)->c, c);
  for (char c = 'A'; c <= 'Z'; ++c) {
    EXPECT_EQ(chart::glyph_for(c)->c, c);
    EXPECT_EQ(chart::glyph_for(static_cast<char>(c - 'A' + 'a'))->c, c);
  }
  EXPECT_EQ(chart::glyph_for('~')->c, '?');
  EXPECT_EQ(chart::text_width("ab", 1), 11);
  EXPECT_EQ(chart::text_width("ab", 2), 22);
  EXPECT_EQ(chart::ascii_text("\xCE\x94PPL \xC2\xB1 1"), "DPPL +/- 1");
}

TEST(Chart, ParetoFrontAndPlot) {
  std::vector<chart::ParetoPoint> points = {
      {"a", 100, 1.0, 0.1, false}, {"b", 200, 0.5, 0.1, false}, {"c", 150, 2.0, 0.2, false},
      {"d", 300, 0.6, 0.1, false}, {"e", 300, 0.2, 0.1, false}, {"f", 100, 1.0, 0.3, false},
  };
  chart::mark_pareto_front(points);
  // By hand: c is beaten by a, d by b; a and f tie (neither lower).
  const std::vector<bool> expected = {true, true, false, false, true, true};
  for (size_t i = 0; i < points.size(); ++i) EXPECT_EQ(points[i].front, expected[i]) << points[i].name;
  testing::TempFile svg(".svg"), png(".png");
  const chart::Canvas c = chart::pareto_chart("bundle: KV modes", "text, 100 predictions", points);
  std::string error;
  ASSERT_TRUE(chart::write_picture(c, svg.path(), &error)) << error;
  ASSERT_TRUE(chart::write_picture(c, png.path(), &error)) << error;
  EXPECT_FALSE(chart::write_picture(c, "/tmp/plot.gif", &error));
  const std::string text = testing::read_file_text(svg.path());
  for (const auto& p : points) EXPECT_NE(text.find(">" + p.name + "<"), std::string::npos) << p.name;
  EXPECT_NE(text.find(">KV bytes per token (all layers and heads)<"), std::string::npos);
  EXPECT_NE(text.find("ΔPPL vs exact KV (%)"), std::string::npos);
  EXPECT_NE(text.find(">Pareto front<"), std::string::npos);
  const Png p = read_png(png.path());
  EXPECT_EQ(p.width, static_cast<uint32_t>(c.width));
  EXPECT_EQ(p.height, static_cast<uint32_t>(c.height));
}

TEST(Chart, TickSteps) {
  EXPECT_DOUBLE_EQ(chart::tick_step(10, 5), 2);
  EXPECT_DOUBLE_EQ(chart::tick_step(1536, 6), 500);
  EXPECT_DOUBLE_EQ(chart::tick_step(0.6, 6), 0.1);
  EXPECT_DOUBLE_EQ(chart::tick_step(4, 5), 1);
}

}  // namespace
}  // namespace tern
