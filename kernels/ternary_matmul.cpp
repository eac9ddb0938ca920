#include "kernels/ternary_matmul.h"

#include <cmath>

#include "kernels/quantize_ukernels.h"
#include "kernels/ternary_ukernels.h"
#include "platform/log.h"

namespace tern {

int32_t quantize_tail__scalar(const float* x, size_t i0, size_t n, float inv, int8_t* q) {
  int32_t s = 0;
  for (size_t i = i0; i < n; ++i) {
    float v = std::nearbyint(x[i] * inv);  // round half to even, as SIMD conversions do
    v = std::fmin(127.0f, std::fmax(-127.0f, v));
    q[i] = static_cast<int8_t>(v);
    s += q[i];
  }
  return s;
}

namespace {

// No vector part: quantize_row_absmax does every element in its scalar steps.
struct ScalarSteps {
  static float abs_max(const float*, size_t, size_t* end) {
    *end = 0;
    return 0.0f;
  }
  static int32_t convert(const float*, size_t, float, int8_t*, size_t* end) {
    *end = 0;
    return 0;
  }
};

}  // namespace

void quantize_row_absmax_int8__scalar(const float* x, size_t n, int8_t* q, float* scale, int32_t* sum) {
  quantize_row_absmax<ScalarSteps>(x, n, q, scale, sum);
}

namespace {

const IsaKernel<QuantizeRowFn> kQuantizeKernels[] = {
#if defined(__x86_64__)
    {Isa::Avx512, quantize_row_absmax_int8__avx512},
    {Isa::Avx2, quantize_row_absmax_int8__avx2},
#endif
#if defined(__aarch64__)
    {Isa::Neon, quantize_row_absmax_int8__neon},
#endif
    {Isa::Scalar, quantize_row_absmax_int8__scalar},
};

const IsaKernel<QuantizeRowFn>& active_quantizer() {
  static const IsaKernel<QuantizeRowFn>& row = isa_select(kQuantizeKernels, active_isa_flags());
  return row;
}

}  // namespace

void quantize_row_absmax_int8(const float* x, size_t n, int8_t* q, float* scale, int32_t* sum) {
  active_quantizer().kernel(x, n, q, scale, sum);
}

Isa quantize_active_isa() { return active_quantizer().isa; }

Error quantize_row_absmax_int8_isa(Isa isa, const float* x, size_t n, int8_t* q, float* scale, int32_t* sum) {
  if (!isa_supported(isa, cpu_features())) {
    return fail(Error::UnsupportedCpu, "no %s quantizer can run here", to_string(isa));
  }
  isa_select(kQuantizeKernels, isa_level_flags(isa)).kernel(x, n, q, scale, sum);
  return Error::Ok;
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

// code(r, c) + 1 in any layout (base-3 digits by division, not the kernels' multiply-shift).
inline int stored_weight(const TernaryMatrix& w, size_t r, size_t c) {
  if (w.layout == TernaryLayout::T2RowMajor) return (w.data[r * ((w.cols + 3) / 4) + c / 4] >> (2 * (c % 4))) & 3;
  if (w.layout == TernaryLayout::T3Interleaved16) return static_cast<int>(t3i_stored_digit(w.data, w.cols, r, c));
  const size_t k_tiles = (w.cols + kT2iBlockCols - 1) / kT2iBlockCols;
  const size_t tile = (r / kT2iBlockRows * k_tiles + c / kT2iBlockCols) * kT2iTileBytes;
  const size_t cc = c % kT2iBlockCols;
  return (w.data[tile + 4 * (r % kT2iBlockRows) + cc % 4] >> (2 * (cc / 4))) & 3;
}

inline int32_t dot_t2_row(const uint8_t* row, const int8_t* q, size_t cols) {
  int32_t acc = 0;
  for (size_t c = 0; c < cols; ++c) {
    const int code = static_cast<int>((row[c / 4] >> (2 * (c % 4))) & 3u) - 1;
    acc += code * q[c];
  }
  return acc;
}

inline int32_t token_sum(const QuantizedActivations& x, size_t t) {
  if (x.sums != nullptr) return x.sums[t];
  const int8_t* q = x.q + t * x.stride;
  int32_t s = 0;
  for (size_t c = 0; c < x.cols; ++c) s += q[c];
  return s;
}

// One table per tiled layout; a level runs the first entry whose flags it has (an AVX-512
// CPU runs the AVX2 base-3 kernel, an i8mm one the dotprod kernel).
using BlockKernelRow = IsaKernel<const TernaryBlockKernelInfo*>;

const BlockKernelRow kT2iBlockKernels[] = {
#if defined(__x86_64__)
    {Isa::Avx512Vnni, &ternary_block_t2i16__avx512vnni},
    {Isa::Avx2, &ternary_block_t2i16__avx2},
#endif
#if defined(__aarch64__)
    {Isa::NeonI8mm, &ternary_block_t2i16__neoni8mm},
    {Isa::NeonDot, &ternary_block_t2i16__neondot},
    {Isa::Neon, &ternary_block_t2i16__neon},
#endif
    {Isa::Scalar, &ternary_block_t2i16__scalar},
};

const BlockKernelRow kT3iBlockKernels[] = {
#if defined(__x86_64__)
    {Isa::Avx2, &ternary_block_t3i16__avx2},
#endif
#if defined(__aarch64__)
    {Isa::NeonDot, &ternary_block_t3i16__neondot},
    {Isa::Neon, &ternary_block_t3i16__neon},
#endif
    {Isa::Scalar, &ternary_block_t3i16__scalar},
};

// The block kernels of one ISA level, one per tiled layout.
struct BlockKernels {
  const BlockKernelRow* t2i16;
  const BlockKernelRow* t3i16;
  const TernaryBlockKernelInfo& for_layout(TernaryLayout layout) const {
    return *(layout == TernaryLayout::T3Interleaved16 ? t3i16 : t2i16)->kernel;
  }
};

BlockKernels block_kernels_for_flags(IsaFlags flags) {
  return {&isa_select(kT2iBlockKernels, flags), &isa_select(kT3iBlockKernels, flags)};
}

// The block kernels the CPU at level `isa` would run (its best within that level).
BlockKernels block_kernels_for(Isa isa) { return block_kernels_for_flags(isa_level_flags(isa)); }

const BlockKernels& active_block_kernels() {
  static const BlockKernels kernels = block_kernels_for_flags(active_isa_flags());
  return kernels;
}

bool is_tiled(TernaryLayout layout) {
  return layout == TernaryLayout::T2Interleaved16 || layout == TernaryLayout::T3Interleaved16;
}

// Both tiled layouts have 16-row blocks of 64-byte tiles; only the columns per tile differ.
static_assert(kT2iBlockRows == kT3iBlockRows && kT2iTileBytes == kT3iTileBytes, "tiled layouts share blocks");
size_t tile_cols(TernaryLayout layout) {
  return layout == TernaryLayout::T3Interleaved16 ? kT3iBlockCols : kT2iBlockCols;
}

// Runs `kernel` (the one for w.layout) over row blocks [b0, b1) and every token, handing each finished
// 16-row x n-token tile of exact products Σ code * q to emit(t0, n, row0, rows, tile). Blocks go
// two at a time through the kernel's two_blocks entry when it has one and there are several
// tokens; one token (decode, bound by reading the weights) runs one block at a time: two
// streams made 2B-4T tg64 slower on the Zen 5 VM (14.1 -> 23.4 tok/s back with one).
template <typename Emit>
void run_tiled_blocks(const TernaryBlockKernelInfo& kernel, const TernaryMatrix& w, const QuantizedActivations& x,
                      size_t b0, size_t b1, Emit& emit) {
  constexpr size_t kMaxTile = 16;
  const size_t k_tiles = (w.cols + tile_cols(w.layout) - 1) / tile_cols(w.layout);
  int32_t out[2 * kMaxTile * kT2iBlockRows];
  int32_t sums[kMaxTile];
  for (size_t b = b0; b < b1;) {
    const size_t blocks = kernel.two_blocks != nullptr && b + 1 < b1 && x.tokens > 1 ? 2 : 1;
    const TernaryBlockKernel fn = blocks == 2 ? kernel.two_blocks : kernel.fn;
    const size_t max_tokens = blocks == 2 ? kernel.two_blocks_max_tokens : kernel.max_tokens;
    const size_t tile_tokens = max_tokens < kMaxTile ? max_tokens : kMaxTile;
    // Token tiles innermost: the blocks' tiles stay in L1/L2 while every token uses them.
    for (size_t t0 = 0; t0 < x.tokens; t0 += tile_tokens) {
      const size_t n = x.tokens - t0 < tile_tokens ? x.tokens - t0 : tile_tokens;
      fn(w.data + b * k_tiles * kT2iTileBytes, w.cols, x.q + t0 * x.stride, x.stride, n, out);
      for (size_t t = 0; t < n; ++t) sums[t] = token_sum(x, t0 + t);
      for (size_t i = 0; i < blocks; ++i) {
        const size_t row0 = (b + i) * kT2iBlockRows;
        const size_t rows = w.rows - row0 < kT2iBlockRows ? w.rows - row0 : kT2iBlockRows;
        int32_t* tile = out + i * n * kT2iBlockRows;
        for (size_t t = 0; t < n; ++t)
          for (size_t r = 0; r < rows; ++r) tile[t * kT2iBlockRows + r] -= sums[t];
        emit(t0, n, row0, rows, tile);
      }
    }
    b += blocks;
  }
}

// Row blocks per thread task: about 8 tasks per thread (enough to balance, few enough to keep
// each stream long), even so that no pair of blocks is split.
size_t blocks_per_task(size_t blocks, const ThreadPool& pool) {
  const size_t tile = blocks / (pool.num_threads() * 8);
  return tile < 2 ? 2 : tile & ~size_t{1};
}

template <typename Emit>
void run_tiled(const TernaryBlockKernelInfo& kernel, const TernaryMatrix& w, const QuantizedActivations& x,
               const ThreadPool* pool, Emit& emit) {
  const size_t blocks = (w.rows + kT2iBlockRows - 1) / kT2iBlockRows;
  auto task = [&](size_t start, size_t count) { run_tiled_blocks(kernel, w, x, start, start + count, emit); };
  if (pool == nullptr || pool->num_threads() <= 1) {
    task(0, blocks);
    return;
  }
  pool->parallel_for_tiles(blocks, blocks_per_task(blocks, *pool), task);
}

void matmul_rowmajor(const TernaryMatrix& w, const QuantizedActivations& x, float* y, size_t y_stride,
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

// Scales each finished tile of exact products into y.
auto float_emit(const TernaryMatrix& w, const QuantizedActivations& x, float* y, size_t y_stride) {
  return [&w, &x, y, y_stride](size_t t0, size_t n, size_t row0, size_t rows, const int32_t* tile) {
    for (size_t t = 0; t < n; ++t) {
      const float s = w.scale * x.scales[t0 + t];
      float* dst = y + (t0 + t) * y_stride + row0;
      const int32_t* src = tile + t * kT2iBlockRows;
      for (size_t i = 0; i < rows; ++i) dst[i] = s * static_cast<float>(src[i]);
    }
  };
}

void matmul_with(const BlockKernels& kernels, const TernaryMatrix& w, const QuantizedActivations& x, float* y,
                 size_t y_stride, const ThreadPool* pool) {
  if (w.layout == TernaryLayout::T2RowMajor) return matmul_rowmajor(w, x, y, y_stride, pool);
  auto emit = float_emit(w, x, y, y_stride);
  run_tiled(kernels.for_layout(w.layout), w, x, pool, emit);
}

size_t row_blocks(const TernaryMatrix& w) { return (w.rows + kT2iBlockRows - 1) / kT2iBlockRows; }

}  // namespace

void ternary_matmul_int32_reference(const TernaryMatrix& w, const QuantizedActivations& x, int32_t* acc) {
  for (size_t t = 0; t < x.tokens; ++t) {
    const int8_t* q = x.q + t * x.stride;
    for (size_t r = 0; r < w.rows; ++r) {
      int32_t sum = 0;
      for (size_t c = 0; c < w.cols; ++c) sum += (stored_weight(w, r, c) - 1) * q[c];
      acc[t * w.rows + r] = sum;
    }
  }
}

Isa ternary_active_isa() { return active_block_kernels().t2i16->isa; }

Isa ternary_active_isa(TernaryLayout layout) {
  if (layout == TernaryLayout::T3Interleaved16) return active_block_kernels().t3i16->isa;
  return layout == TernaryLayout::T2Interleaved16 ? ternary_active_isa() : Isa::Scalar;
}

void ternary_matmul_fused(const TernaryMatmulOutput* outputs, size_t count, const QuantizedActivations& x,
                          const ThreadPool* pool) {
  constexpr size_t kMaxOutputs = 8;
  bool fuse = pool != nullptr && pool->num_threads() > 1 && count <= kMaxOutputs;
  for (size_t i = 0; i < count && fuse; ++i) fuse = is_tiled(outputs[i].w->layout);
  if (!fuse) {
    for (size_t i = 0; i < count; ++i) ternary_matmul(*outputs[i].w, x, outputs[i].y, outputs[i].y_stride, pool);
    return;
  }
  const BlockKernels& kernels = active_block_kernels();
  size_t first[kMaxOutputs + 1] = {0};  // global index of each output's first row block
  for (size_t i = 0; i < count; ++i) first[i + 1] = first[i] + row_blocks(*outputs[i].w);
  auto task = [&](size_t start, size_t n) {
    for (size_t i = 0; i < count; ++i) {
      const size_t b0 = start > first[i] ? start : first[i];
      const size_t b1 = start + n < first[i + 1] ? start + n : first[i + 1];
      if (b0 >= b1) continue;
      const TernaryMatmulOutput& o = outputs[i];
      auto emit = float_emit(*o.w, x, o.y, o.y_stride);
      run_tiled_blocks(kernels.for_layout(o.w->layout), *o.w, x, b0 - first[i], b1 - first[i], emit);
    }
  };
  pool->parallel_for_tiles(first[count], blocks_per_task(first[count], *pool), task);
}

void ternary_matmul(const TernaryMatrix& w, const QuantizedActivations& x, float* y, size_t y_stride,
                    const ThreadPool* pool) {
  matmul_with(active_block_kernels(), w, x, y, y_stride, pool);
}

Error ternary_matmul_isa(Isa isa, const TernaryMatrix& w, const QuantizedActivations& x, float* y, size_t y_stride,
                         const ThreadPool* pool) {
  if (!isa_supported(isa, cpu_features())) {
    return fail(Error::UnsupportedCpu, "no %s ternary kernels can run here", to_string(isa));
  }
  matmul_with(block_kernels_for(isa), w, x, y, y_stride, pool);
  return Error::Ok;
}

Error ternary_matmul_int32(Isa isa, const TernaryMatrix& w, const QuantizedActivations& x, int32_t* acc,
                           const ThreadPool* pool) {
  if (!isa_supported(isa, cpu_features())) {
    return fail(Error::UnsupportedCpu, "no %s ternary kernels can run here", to_string(isa));
  }
  if (w.layout == TernaryLayout::T2RowMajor) {
    ternary_matmul_int32_reference(w, x, acc);
    return Error::Ok;
  }
  auto emit = [&](size_t t0, size_t n, size_t row0, size_t rows, const int32_t* tile) {
    for (size_t t = 0; t < n; ++t)
      for (size_t i = 0; i < rows; ++i) acc[(t0 + t) * w.rows + row0 + i] = tile[t * kT2iBlockRows + i];
  };
  run_tiled(block_kernels_for(isa).for_layout(w.layout), w, x, pool, emit);
  return Error::Ok;
}

}  // namespace tern
