#include "kernels/dense_matmul.h"

#include <cmath>
#include <cstring>

#include "kernels/dense_ukernels.h"
#include "kernels/ternary_matmul.h"

namespace tern {

const char* to_string(DenseType type) {
  switch (type) {
    case DenseType::F32: return "f32";
    case DenseType::F16: return "f16";
    case DenseType::BF16: return "bf16";
    case DenseType::Q8: return "q8";
    case DenseType::Q4: return "q4";
  }
  return "unknown";
}

size_t dense_data_size(DenseType type, size_t rows, size_t cols) {
  const size_t n = rows * cols;
  switch (type) {
    case DenseType::F32: return n * 4;
    case DenseType::F16:
    case DenseType::BF16: return n * 2;
    case DenseType::Q8: return n;
    case DenseType::Q4: return rows * ((cols + 1) / 2);
  }
  return 0;
}

size_t dense_scale_count(DenseType type, size_t rows, size_t cols, size_t group) {
  if (type != DenseType::Q8 && type != DenseType::Q4) return 0;
  if (group == 0) return 0;
  return rows * ((cols + group - 1) / group);
}

Error dense_matrix_validate(const DenseMatrix& m) {
  if (m.data == nullptr || m.rows == 0 || m.cols == 0) {
    return fail(Error::InvalidArgument, "dense matrix without data or with a zero dimension");
  }
  const size_t need = dense_data_size(m.type, m.rows, m.cols);
  if (need == 0) return fail(Error::UnsupportedType, "dense type %u not supported", static_cast<unsigned>(m.type));
  if (m.size_bytes < need) {
    return fail(Error::Truncated, "dense %s %zu x %zu matrix needs %zu bytes, has %zu", to_string(m.type), m.rows,
                m.cols, need, m.size_bytes);
  }
  if (m.type == DenseType::Q8 || m.type == DenseType::Q4) {
    if (m.group == 0 || m.scales == nullptr) return fail(Error::InvalidArgument, "quantized matrix without scales");
    if (m.type == DenseType::Q4 && (m.group % 2) != 0) return fail(Error::InvalidArgument, "q4 group must be even");
  }
  return Error::Ok;
}

namespace {

// Dequantizes columns [c0, c0 + n) of one row.
void dense_row_slice_f32(const DenseMatrix& m, size_t row, size_t c0, size_t n, float* out) {
  const size_t cols = m.cols;
  switch (m.type) {
    case DenseType::F32: std::memcpy(out, static_cast<const float*>(m.data) + row * cols + c0, n * 4); return;
    case DenseType::F16: {
      const uint16_t* p = static_cast<const uint16_t*>(m.data) + row * cols + c0;
      for (size_t c = 0; c < n; ++c) out[c] = f16_to_f32(p[c]);
      return;
    }
    case DenseType::BF16: {
      const uint16_t* p = static_cast<const uint16_t*>(m.data) + row * cols + c0;
      for (size_t c = 0; c < n; ++c) out[c] = bf16_to_f32(p[c]);
      return;
    }
    case DenseType::Q8: {
      const int8_t* p = static_cast<const int8_t*>(m.data) + row * cols;
      const float* s = m.scales + row * ((cols + m.group - 1) / m.group);
      for (size_t c = c0; c < c0 + n; ++c) out[c - c0] = static_cast<float>(p[c]) * s[c / m.group];
      return;
    }
    case DenseType::Q4: {
      const uint8_t* p = static_cast<const uint8_t*>(m.data) + row * ((cols + 1) / 2);
      const float* s = m.scales + row * ((cols + m.group - 1) / m.group);
      for (size_t c = c0; c < c0 + n; ++c) {
        const int v = static_cast<int>((p[c / 2] >> (4 * (c % 2))) & 0xfu) - 8;
        out[c - c0] = static_cast<float>(v) * s[c / m.group];
      }
      return;
    }
  }
}

void dense_gemv_scalar_rows(const DenseMatrix& m, const float* x, float* y, size_t start, size_t count) {
  constexpr size_t kSlice = 512;  // stack buffer: no allocation, any row width
  float buf[kSlice];
  for (size_t r = start; r < start + count; ++r) {
    float acc = 0.0f;
    for (size_t c0 = 0; c0 < m.cols; c0 += kSlice) {
      const size_t n = m.cols - c0 < kSlice ? m.cols - c0 : kSlice;
      dense_row_slice_f32(m, r, c0, n, buf);
      for (size_t c = 0; c < n; ++c) acc += buf[c] * x[c0 + c];
    }
    y[r] = acc;
  }
}

bool dense_gemv__scalar(const DenseMatrix& m, const float* x, float* y, size_t row_begin, size_t row_end) {
  dense_gemv_scalar_rows(m, x, y, row_begin, row_end - row_begin);
  return true;
}

const IsaKernel<DenseGemvKernel> kDenseGemvKernels[] = {
#if defined(__x86_64__)
    {Isa::Avx512, dense_gemv__avx512},
    {Isa::Avx2, dense_gemv__avx2},
#endif
#if defined(__aarch64__)
    {Isa::Neon, dense_gemv__neon},
#endif
    {Isa::Scalar, dense_gemv__scalar},
};

const IsaKernel<DenseGemvKernel>& active_dense_gemv() {
  static const IsaKernel<DenseGemvKernel>& row = isa_select(kDenseGemvKernels, active_isa_flags());
  return row;
}

void dense_gemv_with(DenseGemvKernel kernel, const DenseMatrix& m, const float* x, float* y, const ThreadPool* pool) {
  auto rows_task = [&](size_t start, size_t count) {
    if (!kernel(m, x, y, start, start + count)) dense_gemv_scalar_rows(m, x, y, start, count);
  };
  if (pool != nullptr && pool->num_threads() > 1) {
    pool->parallel_for_tiles(m.rows, 256, rows_task);
  } else {
    rows_task(0, m.rows);
  }
}

}  // namespace

Error dense_gemv_f32_isa(Isa isa, const DenseMatrix& m, const float* x, float* y, const ThreadPool* pool) {
  if (!isa_supported(isa, cpu_features())) {
    return fail(Error::UnsupportedCpu, "no %s dense kernels can run here", to_string(isa));
  }
  dense_gemv_with(isa_select(kDenseGemvKernels, isa_level_flags(isa)).kernel, m, x, y, pool);
  return Error::Ok;
}

void dense_row_f32(const DenseMatrix& m, size_t row, float* out) { dense_row_slice_f32(m, row, 0, m.cols, out); }

void dense_gemv_f32(const DenseMatrix& m, const float* x, float* y, const ThreadPool* pool) {
  dense_gemv_with(active_dense_gemv().kernel, m, x, y, pool);
}

void dense_gemv_i8__scalar(const DenseMatrix& m, const DenseActivationsI8& x, float* y, size_t row_begin,
                           size_t row_end) {
  const size_t groups = m.cols / m.group;
  for (size_t r = row_begin; r < row_end; ++r) {
    float acc = 0.0f;
    for (size_t g = 0; g < groups; ++g) {
      int32_t dot = 0;
      for (size_t c = g * m.group; c < (g + 1) * m.group; ++c) {
        int32_t w;
        if (m.type == DenseType::Q8) {
          w = static_cast<const int8_t*>(m.data)[r * m.cols + c];
        } else {
          w = (static_cast<const uint8_t*>(m.data)[r * (m.cols / 2) + c / 2] >> (4 * (c % 2))) & 0xf;  // v + 8
        }
        dot += w * x.q[dense_i8_position(m.type, c)];
      }
      if (m.type == DenseType::Q4) dot -= 8 * x.sums[g];
      acc += static_cast<float>(dot) * (m.scales[r * groups + g] * x.scales[g]);
    }
    y[r] = acc;
  }
}

namespace {

const IsaKernel<DenseGemvI8Kernel> kDenseGemvI8Kernels[] = {
#if defined(__x86_64__)
    {Isa::Avx512Vnni, dense_gemv_i8__avx512vnni}, {Isa::Avx2, dense_gemv_i8__avx2},
#endif
#if defined(__aarch64__)
    {Isa::NeonDot, dense_gemv_i8__neondot},       {Isa::Neon, dense_gemv_i8__neon},
#endif
    {Isa::Scalar, dense_gemv_i8__scalar},
};

const IsaKernel<DenseGemvI8Kernel>& active_dense_gemv_i8() {
  static const IsaKernel<DenseGemvI8Kernel>& row = isa_select(kDenseGemvI8Kernels, active_isa_flags());
  return row;
}

void quantize_activations_i8(const DenseMatrix& m, const float* x, int8_t* q, float* scales, int32_t* sums) {
  for (size_t g = 0; g < m.cols / m.group; ++g) {
    const size_t c0 = g * m.group, c1 = c0 + m.group;
    float amax = 0.0f;
    for (size_t c = c0; c < c1; ++c) amax = std::fmax(amax, std::fabs(x[c]));
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    int32_t sum = 0;
    for (size_t c = c0; c < c1; ++c) {
      const float v = std::fmin(127.0f, std::fmax(-127.0f, std::nearbyint(x[c] * inv)));  // NaN -> -127
      const int8_t qv = static_cast<int8_t>(v);
      q[dense_i8_position(m.type, c)] = qv;
      sum += qv;
    }
    scales[g] = amax / 127.0f;
    sums[g] = sum;
  }
}

void dense_gemv_i8_with(DenseGemvI8Kernel kernel, const DenseMatrix& m, const float* x, float* y,
                        const ThreadPool* pool) {
  constexpr size_t kMinGroup = 32;
  int8_t q[kDenseI8MaxCols];
  float scales[kDenseI8MaxCols / kMinGroup];
  int32_t sums[kDenseI8MaxCols / kMinGroup];
  quantize_activations_i8(m, x, q, scales, sums);
  const DenseActivationsI8 xa{q, scales, sums};
  auto rows_task = [&](size_t start, size_t count) { kernel(m, xa, y, start, start + count); };
  if (pool != nullptr && pool->num_threads() > 1) {
    pool->parallel_for_tiles(m.rows, 256, rows_task);
  } else {
    rows_task(0, m.rows);
  }
}

}  // namespace

bool dense_gemv_i8_applies(const DenseMatrix& m) {
  if (m.type != DenseType::Q8 && m.type != DenseType::Q4) return false;
  const size_t vector = m.type == DenseType::Q8 ? 32 : 64;
  return m.group > 0 && m.group % vector == 0 && m.cols % m.group == 0 && m.cols <= kDenseI8MaxCols;
}

void dense_gemv_i8(const DenseMatrix& m, const float* x, float* y, const ThreadPool* pool) {
  if (!dense_gemv_i8_applies(m)) return dense_gemv_f32(m, x, y, pool);
  dense_gemv_i8_with(active_dense_gemv_i8().kernel, m, x, y, pool);
}

Error dense_gemv_i8_isa(Isa isa, const DenseMatrix& m, const float* x, float* y, const ThreadPool* pool) {
  if (!isa_supported(isa, cpu_features())) {
    return fail(Error::UnsupportedCpu, "no %s dense kernels can run here", to_string(isa));
  }
  if (!dense_gemv_i8_applies(m)) return dense_gemv_f32_isa(isa, m, x, y, pool);
  dense_gemv_i8_with(isa_select(kDenseGemvI8Kernels, isa_level_flags(isa)).kernel, m, x, y, pool);
  return Error::Ok;
}

}  // namespace tern

namespace tern {

Isa dense_gemv_active_isa() { return active_dense_gemv().isa; }
Isa dense_gemv_i8_active_isa() { return active_dense_gemv_i8().isa; }

}  // namespace tern
