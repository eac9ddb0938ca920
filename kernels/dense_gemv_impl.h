// The dense GEMV algorithm shared by the SIMD translation units; each includes this with
// its own vector traits `V` (defined in that file's anonymous namespace, so every
// instantiation is distinct and carries only that file's ISA flags):
//   using Vec; kWidth;  zero(), load(const float*), load(const uint16_t* halves),
//   fma(a, b, acc) = a * b + acc, set1(float), hsum(Vec)  (on x86 those of f32_vec_<isa>.h),
//   bf16(const uint16_t*), q8(const int8_t*)
// Weights are widened to f32 in registers and multiplied by the f32 activations with
// FMA, four rows at a time so each activation load serves four rows. Accuracy is that of
// the f32 reference; only the summation order differs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dense_matmul.h"

namespace tern {
namespace dense_impl {

constexpr size_t kRows = 4;
constexpr size_t kLine = 64;

// Rows are read four at a time, which the hardware prefetchers see as four short
// streams restarting every few KB; prefetching the next four rows while these are
// summed turns that back into one sequential stream (lm_head 128256 x 2560, one thread:
// q8 29 -> 12 ms, f16 38 -> 27 ms).
inline void prefetch_line(const void* p) { __builtin_prefetch(p, 0, 0); }

template <typename V, size_t N, typename Load>
inline void rows_plain(const Load& load, size_t cols, const float* x, float* y, size_t r) {
  const size_t full = cols / V::kWidth * V::kWidth;
  typename V::Vec acc[N];
  for (size_t i = 0; i < N; ++i) acc[i] = V::zero();
  const size_t lines_every = kLine / (V::kWidth * Load::kBytes);  // vector steps per cache line
  for (size_t c = 0, step = 0; c < full; c += V::kWidth, ++step) {
    if (step % lines_every == 0 && r + 2 * N <= load.rows)
      for (size_t i = 0; i < N; ++i) prefetch_line(load.address(r + N + i, c));
    const typename V::Vec xv = V::load(x + c);
    for (size_t i = 0; i < N; ++i) acc[i] = V::fma(load(r + i, c), xv, acc[i]);
  }
  for (size_t i = 0; i < N; ++i) {
    float s = V::hsum(acc[i]);
    for (size_t c = full; c < cols; ++c) s += load.scalar(r + i, c) * x[c];
    y[r + i] = s;
  }
}

template <typename V, size_t N>
inline void rows_q8(const DenseMatrix& m, const float* x, float* y, size_t r) {
  const int8_t* w = static_cast<const int8_t*>(m.data);
  const size_t groups = m.cols / m.group;
  typename V::Vec acc[N];
  for (size_t i = 0; i < N; ++i) acc[i] = V::zero();
  const bool prefetch = r + 2 * N <= m.rows;
  for (size_t g = 0; g < groups; ++g) {
    if (prefetch)
      for (size_t i = 0; i < N; ++i)
        for (size_t b = g * m.group; b < (g + 1) * m.group; b += kLine) prefetch_line(w + (r + N + i) * m.cols + b);
    typename V::Vec part[N];
    for (size_t i = 0; i < N; ++i) part[i] = V::zero();
    for (size_t c = g * m.group; c < (g + 1) * m.group; c += V::kWidth) {
      const typename V::Vec xv = V::load(x + c);
      for (size_t i = 0; i < N; ++i) part[i] = V::fma(V::q8(w + (r + i) * m.cols + c), xv, part[i]);
    }
    for (size_t i = 0; i < N; ++i) acc[i] = V::fma(part[i], V::set1(m.scales[(r + i) * groups + g]), acc[i]);
  }
  for (size_t i = 0; i < N; ++i) y[r + i] = V::hsum(acc[i]);
}

template <typename V>
struct LoadF32 {
  static constexpr size_t kBytes = 4;
  const float* w;
  size_t cols, rows;
  const void* address(size_t r, size_t c) const { return w + r * cols + c; }
  typename V::Vec operator()(size_t r, size_t c) const { return V::load(w + r * cols + c); }
  float scalar(size_t r, size_t c) const { return w[r * cols + c]; }
};
template <typename V>
struct LoadF16 {
  static constexpr size_t kBytes = 2;
  const uint16_t* w;
  size_t cols, rows;
  const void* address(size_t r, size_t c) const { return w + r * cols + c; }
  typename V::Vec operator()(size_t r, size_t c) const { return V::load(w + r * cols + c); }
  float scalar(size_t r, size_t c) const { return f16_to_f32(w[r * cols + c]); }
};
template <typename V>
struct LoadBF16 {
  static constexpr size_t kBytes = 2;
  const uint16_t* w;
  size_t cols, rows;
  const void* address(size_t r, size_t c) const { return w + r * cols + c; }
  typename V::Vec operator()(size_t r, size_t c) const { return V::bf16(w + r * cols + c); }
  float scalar(size_t r, size_t c) const { return bf16_to_f32(w[r * cols + c]); }
};

template <typename V, typename Load>
inline void gemv_plain(const Load& load, size_t cols, const float* x, float* y, size_t r0, size_t r1) {
  size_t r = r0;
  for (; r + kRows <= r1; r += kRows) rows_plain<V, kRows>(load, cols, x, y, r);
  for (; r < r1; ++r) rows_plain<V, 1>(load, cols, x, y, r);
}

// False when there is no vector path for this matrix (the caller runs the scalar one).
template <typename V>
inline bool gemv(const DenseMatrix& m, const float* x, float* y, size_t r0, size_t r1, bool has_f16) {
  switch (m.type) {
    case DenseType::F32:
      gemv_plain<V>(LoadF32<V>{static_cast<const float*>(m.data), m.cols, m.rows}, m.cols, x, y, r0, r1);
      return true;
    case DenseType::F16:
      if (!has_f16) return false;
      gemv_plain<V>(LoadF16<V>{static_cast<const uint16_t*>(m.data), m.cols, m.rows}, m.cols, x, y, r0, r1);
      return true;
    case DenseType::BF16:
      gemv_plain<V>(LoadBF16<V>{static_cast<const uint16_t*>(m.data), m.cols, m.rows}, m.cols, x, y, r0, r1);
      return true;
    case DenseType::Q8: {
      if (m.group % V::kWidth != 0 || m.cols % m.group != 0) return false;
      size_t r = r0;
      for (; r + kRows <= r1; r += kRows) rows_q8<V, kRows>(m, x, y, r);
      for (; r < r1; ++r) rows_q8<V, 1>(m, x, y, r);
      return true;
    }
    default: return false;
  }
}

}  // namespace dense_impl
}  // namespace tern
