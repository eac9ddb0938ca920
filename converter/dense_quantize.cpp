#include "converter/dense_quantize.h"

#include <cmath>

namespace tern::convert {

void quantize_dense_q8(const float* w, size_t rows, size_t cols, size_t group, int8_t* q, float* scales) {
  const size_t groups = (cols + group - 1) / group;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t g = 0; g < groups; ++g) {
      const size_t c0 = g * group, c1 = c0 + group < cols ? c0 + group : cols;
      float amax = 0.0f;
      for (size_t c = c0; c < c1; ++c) amax = std::fmax(amax, std::fabs(w[r * cols + c]));
      const float s = amax / 127.0f;
      scales[r * groups + g] = s;
      for (size_t c = c0; c < c1; ++c) {
        q[r * cols + c] = s == 0.0f ? 0 : static_cast<int8_t>(std::nearbyint(w[r * cols + c] / s));
      }
    }
  }
}

void quantize_dense_q4(const float* w, size_t rows, size_t cols, size_t group, uint8_t* q, float* scales) {
  const size_t groups = (cols + group - 1) / group;
  const size_t row_bytes = (cols + 1) / 2;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t b = 0; b < row_bytes; ++b) q[r * row_bytes + b] = 0x88;  // zeros
    for (size_t g = 0; g < groups; ++g) {
      const size_t c0 = g * group, c1 = c0 + group < cols ? c0 + group : cols;
      float amax = 0.0f;
      for (size_t c = c0; c < c1; ++c) amax = std::fmax(amax, std::fabs(w[r * cols + c]));
      const float s = amax / 7.0f;
      scales[r * groups + g] = s;
      for (size_t c = c0; c < c1; ++c) {
        int v = s == 0.0f ? 0 : static_cast<int>(std::nearbyint(w[r * cols + c] / s));
        v = v < -8 ? -8 : (v > 7 ? 7 : v);
        uint8_t& byte = q[r * row_bytes + c / 2];
        const unsigned shift = 4 * (c % 2);
        byte = static_cast<uint8_t>((byte & ~(0xfu << shift)) | (static_cast<unsigned>(v + 8) << shift));
      }
    }
  }
}

}  // namespace tern::convert
