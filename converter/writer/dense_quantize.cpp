#include "converter/writer/dense_quantize.h"

#include <algorithm>
#include <cmath>

namespace tern::convert {
namespace {

// Every group of `group` columns of every row with its scale absmax / qmax; each value
// rounded (half to even) to a multiple of it goes to store(row, col, v) for the layout.
template <class Store>
void quantize_groups(const float* w, size_t rows, size_t cols, size_t group, float qmax, float* scales, Store store) {
  const size_t groups = (cols + group - 1) / group;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t g = 0; g < groups; ++g) {
      const size_t c0 = g * group, c1 = c0 + group < cols ? c0 + group : cols;
      float amax = 0.0f;
      for (size_t c = c0; c < c1; ++c) amax = std::fmax(amax, std::fabs(w[r * cols + c]));
      const float s = amax / qmax;
      scales[r * groups + g] = s;
      for (size_t c = c0; c < c1; ++c) {
        store(r, c, s == 0.0f ? 0 : static_cast<int>(std::nearbyint(w[r * cols + c] / s)));
      }
    }
  }
}

}  // namespace

void quantize_dense_q8(const float* w, size_t rows, size_t cols, size_t group, int8_t* q, float* scales) {
  quantize_groups(w, rows, cols, group, 127.0f, scales,
                  [&](size_t r, size_t c, int v) { q[r * cols + c] = static_cast<int8_t>(v); });
}

void quantize_dense_q4(const float* w, size_t rows, size_t cols, size_t group, uint8_t* q, float* scales) {
  const size_t row_bytes = (cols + 1) / 2;
  std::fill(q, q + rows * row_bytes, uint8_t{0x88});  // zeros
  quantize_groups(w, rows, cols, group, 7.0f, scales, [&](size_t r, size_t c, int v) {
    v = v < -8 ? -8 : (v > 7 ? 7 : v);
    uint8_t& byte = q[r * row_bytes + c / 2];
    const unsigned shift = 4 * (c % 2);
    byte = static_cast<uint8_t>((byte & ~(0xfu << shift)) | (static_cast<unsigned>(v + 8) << shift));
  });
}

}  // namespace tern::convert
