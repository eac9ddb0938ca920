#include "kernels/ternary_matmul.h"

#include <cmath>

namespace tern {

void quantize_row_absmax_int8(const float* x, size_t n, int8_t* q, float* scale, int32_t* sum) {
  float amax = 0.0f;
  for (size_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  if (amax == 0.0f) {
    for (size_t i = 0; i < n; ++i) q[i] = 0;
    *scale = 0.0f;
    *sum = 0;
    return;
  }
  const float inv = 127.0f / amax;
  int32_t s = 0;
  for (size_t i = 0; i < n; ++i) {
    float v = std::nearbyint(x[i] * inv);  // round half to even, as SIMD conversions do
    v = std::fmin(127.0f, std::fmax(-127.0f, v));
    q[i] = static_cast<int8_t>(v);
    s += q[i];
  }
  *scale = amax / 127.0f;
  *sum = s;
}

Error ternary_matrix_validate(const TernaryMatrix& w) {
  if (w.data == nullptr) return fail(Error::InvalidArgument, "ternary matrix has no data");
  if (!is_known_layout(static_cast<uint32_t>(w.layout))) {
    return fail(Error::UnsupportedType, "ternary layout %u is not supported", static_cast<unsigned>(w.layout));
  }
  if (w.rows == 0 || w.cols == 0) return fail(Error::ShapeMismatch, "ternary matrix with a zero dimension");
  const size_t need = ternary_packed_size(w.layout, w.rows, w.cols);
  if (need == 0 || w.size_bytes < need) {
    return fail(Error::Truncated, "ternary %zu x %zu matrix needs %zu bytes, has %zu", w.rows, w.cols, need,
                w.size_bytes);
  }
  return Error::Ok;
}

namespace {

inline int32_t dot_t2_row(const uint8_t* row, const int8_t* q, size_t cols) {
  int32_t acc = 0;
  for (size_t c = 0; c < cols; ++c) {
    const int code = static_cast<int>((row[c / 4] >> (2 * (c % 4))) & 3u) - 1;
    acc += code * q[c];
  }
  return acc;
}

}  // namespace

void ternary_matmul_int32_reference(const TernaryMatrix& w, const QuantizedActivations& x, int32_t* acc) {
  const size_t row_bytes = (w.cols + 3) / 4;
  for (size_t t = 0; t < x.tokens; ++t) {
    for (size_t r = 0; r < w.rows; ++r) {
      acc[t * w.rows + r] = dot_t2_row(w.data + r * row_bytes, x.q + t * x.stride, w.cols);
    }
  }
}

void ternary_matmul(const TernaryMatrix& w, const QuantizedActivations& x, float* y, size_t y_stride,
                    const ThreadPool* pool) {
  const size_t row_bytes = (w.cols + 3) / 4;
  auto rows_task = [&](size_t start, size_t count) {
    for (size_t t = 0; t < x.tokens; ++t) {
      const float s = w.scale * x.scales[t];
      const int8_t* q = x.q + t * x.stride;
      for (size_t r = start; r < start + count; ++r) {
        y[t * y_stride + r] = s * static_cast<float>(dot_t2_row(w.data + r * row_bytes, q, w.cols));
      }
    }
  };
  if (pool != nullptr) {
    pool->parallel_for_tiles(w.rows, 64, rows_task);
  } else {
    rows_task(0, w.rows);
  }
}

}  // namespace tern
