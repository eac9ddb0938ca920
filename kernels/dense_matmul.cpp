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

// Rows go out in tiles of 256: a q4 tile of a 2,560-wide lm_head is 320 KB, so when several
// tokens run over it (dense_gemv_i8_tokens) the later ones find it in L2.
constexpr size_t kRowTile = 256;

// fn(start, count) over the matrix's rows, on the pool's threads when it has several.
template <typename F>
void for_row_tiles(const DenseMatrix& m, const ThreadPool* pool, F& fn) {
  if (pool != nullptr && pool->num_threads() > 1) {
    pool->parallel_for_tiles(m.rows, kRowTile, fn);
  } else {
    fn(0, m.rows);
  }
}

// fn(r, end) over [start, start + count) in tiles of kRowTile rows: a task's rows walked tile by
// tile, so that every token after the first finds the tile in L2.
template <typename F>
void for_each_tile(size_t start, size_t count, F&& fn) {
  for (size_t r = start; r < start + count; r += kRowTile)
    fn(r, r + kRowTile < start + count ? r + kRowTile : start + count);
}

void dense_gemv_tokens_with(DenseGemvKernel kernel, const DenseMatrix& m, const float* x, size_t x_stride, size_t n,
                            float* const* y, const ThreadPool* pool) {
  auto rows_task = [&](size_t start, size_t count) {
    for_each_tile(start, count, [&](size_t r, size_t end) {
      for (size_t t = 0; t < n; ++t) {
        if (!kernel(m, x + t * x_stride, y[t], r, end)) dense_gemv_scalar_rows(m, x + t * x_stride, y[t], r, end - r);
      }
    });
  };
  for_row_tiles(m, pool, rows_task);
}

void dense_gemv_with(DenseGemvKernel kernel, const DenseMatrix& m, const float* x, float* y, const ThreadPool* pool) {
  dense_gemv_tokens_with(kernel, m, x, 0, 1, &y, pool);
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

// Several tokens through a one-token kernel, one after the other (ISAs without a tokens kernel).
template <DenseGemvI8Fn* Row>
void tokens_by_row(const DenseMatrix& m, const DenseActivationsI8* x, size_t n, float* const* y, size_t row_begin,
                   size_t row_end) {
  for (size_t t = 0; t < n; ++t) Row(m, x[t], y[t], row_begin, row_end);
}

const IsaKernel<DenseGemvI8Kernels> kDenseGemvI8Kernels[] = {
#if defined(__x86_64__)
    {Isa::Avx512Vnni, {dense_gemv_i8__avx512vnni, dense_gemv_i8_tokens__avx512vnni}},
    {Isa::Avx2, {dense_gemv_i8__avx2, dense_gemv_i8_tokens__avx2}},
#endif
#if defined(__aarch64__)
    {Isa::NeonDot, {dense_gemv_i8__neondot, tokens_by_row<dense_gemv_i8__neondot>}},
    {Isa::Neon, {dense_gemv_i8__neon, tokens_by_row<dense_gemv_i8__neon>}},
#endif
    {Isa::Scalar, {dense_gemv_i8__scalar, tokens_by_row<dense_gemv_i8__scalar>}},
};

const IsaKernel<DenseGemvI8Kernels>& active_dense_gemv_i8() {
  static const IsaKernel<DenseGemvI8Kernels>& row = isa_select(kDenseGemvI8Kernels, active_isa_flags());
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

// One token's activations quantized for the i8 kernels, inside dense_gemv_tokens_work_bytes.
struct TokenWork {
  int8_t* q;
  float* scales;
  int32_t* sums;
};

constexpr size_t kMinGroup = 32;  // q8's vector; q4 groups are multiples of 64

size_t token_work_bytes(size_t cols) {
  const size_t groups = (cols + kMinGroup - 1) / kMinGroup;
  return (cols + 7) / 8 * 8 + groups * (sizeof(float) + sizeof(int32_t));
}

TokenWork token_work(void* work, size_t cols, size_t t) {
  uint8_t* base = static_cast<uint8_t*>(work) + t * token_work_bytes(cols);
  const size_t groups = (cols + kMinGroup - 1) / kMinGroup;
  TokenWork w;
  w.q = reinterpret_cast<int8_t*>(base);
  w.scales = reinterpret_cast<float*>(base + (cols + 7) / 8 * 8);
  w.sums = reinterpret_cast<int32_t*>(w.scales + groups);
  return w;
}

// Tokens a tokens kernel takes at once: their activations' descriptors live on the stack.
constexpr size_t kTokensPerCall = 16;

// Quantizes the n tokens into `work`, then runs the tokens kernel over each tile of rows.
void dense_gemv_i8_tokens_with(const DenseGemvI8Kernels& kernels, const DenseMatrix& m, const float* x, size_t x_stride,
                               size_t n, float* const* y, void* work, const ThreadPool* pool) {
  for (size_t t = 0; t < n; ++t) {
    const TokenWork w = token_work(work, m.cols, t);
    quantize_activations_i8(m, x + t * x_stride, w.q, w.scales, w.sums);
  }
  auto rows_task = [&](size_t start, size_t count) {
    if (n == 1) {
      const TokenWork w = token_work(work, m.cols, 0);
      return kernels.row(m, DenseActivationsI8{w.q, w.scales, w.sums}, y[0], start, start + count);
    }
    DenseActivationsI8 acts[kTokensPerCall];
    for (size_t t0 = 0; t0 < n; t0 += kTokensPerCall) {
      const size_t k = n - t0 < kTokensPerCall ? n - t0 : kTokensPerCall;
      for (size_t t = 0; t < k; ++t) {
        const TokenWork w = token_work(work, m.cols, t0 + t);
        acts[t] = DenseActivationsI8{w.q, w.scales, w.sums};
      }
      for_each_tile(start, count, [&](size_t r, size_t end) { kernels.tokens(m, acts, k, y + t0, r, end); });
    }
  };
  for_row_tiles(m, pool, rows_task);
}

// One token: its activations on the stack (no work buffer to pass).
void dense_gemv_i8_with(const DenseGemvI8Kernels& kernels, const DenseMatrix& m, const float* x, float* y,
                        const ThreadPool* pool) {
  alignas(8) uint8_t work[kDenseI8MaxCols + kDenseI8MaxCols / kMinGroup * (sizeof(float) + sizeof(int32_t))];
  dense_gemv_i8_tokens_with(kernels, m, x, 0, 1, &y, work, pool);
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

size_t dense_gemv_tokens_work_bytes(size_t cols, size_t n) { return n * token_work_bytes(cols); }

void dense_gemv_i8_tokens(const DenseMatrix& m, const float* x, size_t x_stride, size_t n, float* const* y, void* work,
                          const ThreadPool* pool) {
  if (!dense_gemv_i8_applies(m)) return dense_gemv_tokens_with(active_dense_gemv().kernel, m, x, x_stride, n, y, pool);
  dense_gemv_i8_tokens_with(active_dense_gemv_i8().kernel, m, x, x_stride, n, y, work, pool);
}

Error dense_gemv_i8_tokens_isa(Isa isa, const DenseMatrix& m, const float* x, size_t x_stride, size_t n,
                               float* const* y, void* work, const ThreadPool* pool) {
  if (!isa_supported(isa, cpu_features())) {
    return fail(Error::UnsupportedCpu, "no %s dense kernels can run here", to_string(isa));
  }
  if (!dense_gemv_i8_applies(m)) {
    dense_gemv_tokens_with(isa_select(kDenseGemvKernels, isa_level_flags(isa)).kernel, m, x, x_stride, n, y, pool);
  } else {
    dense_gemv_i8_tokens_with(isa_select(kDenseGemvI8Kernels, isa_level_flags(isa)).kernel, m, x, x_stride, n, y, work,
                              pool);
  }
  return Error::Ok;
}

}  // namespace tern

namespace tern {

Isa dense_gemv_active_isa() { return active_dense_gemv().isa; }
Isa dense_gemv_i8_active_isa() { return active_dense_gemv_i8().isa; }

}  // namespace tern
