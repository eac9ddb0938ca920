// Every ISA's ternary kernels against a plain dot product over the unpacked codes:
// ternary x int8 sums are exact, so equality is exact.
#include "kernels/ternary_matmul.h"

#include <gtest/gtest.h>

#include "kernels/ternary_ukernels.h"

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace tern {
namespace {

bool slow_emulation() { return std::getenv("TERN_SLOW_EMULATION") != nullptr; }

struct Problem {
  size_t rows, cols, tokens, stride;
  std::vector<int8_t> codes;  // rows x cols
  std::vector<int8_t> q;      // tokens x stride
  std::vector<float> scales;
  std::vector<int32_t> sums;
  std::vector<uint8_t> packed;
  TernaryMatrix w;
  QuantizedActivations x;
};

// Activations include the extremes +-127 and, beyond `cols` in each row, garbage that
// must never be read into a result.
Problem make_problem(size_t rows, size_t cols, size_t tokens, TernaryLayout layout, uint32_t seed, size_t pad = 3) {
  Problem p;
  p.rows = rows;
  p.cols = cols;
  p.tokens = tokens;
  p.stride = cols + pad;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> code(-1, 1), act(-127, 127);
  p.codes.resize(rows * cols);
  for (auto& c : p.codes) c = static_cast<int8_t>(code(rng));
  p.q.resize(tokens * p.stride);
  for (auto& v : p.q) v = static_cast<int8_t>(act(rng));
  for (size_t t = 0; t < tokens; ++t) {
    p.q[t * p.stride] = 127;
    if (cols > 1) p.q[t * p.stride + cols - 1] = -127;
  }
  p.sums.resize(tokens);
  p.scales.resize(tokens);
  for (size_t t = 0; t < tokens; ++t) {
    int32_t s = 0;
    for (size_t c = 0; c < cols; ++c) s += p.q[t * p.stride + c];
    p.sums[t] = s;
    p.scales[t] = 0.01f * static_cast<float>(t + 1);
  }
  p.packed.resize(ternary_packed_size(layout, rows, cols));
  EXPECT_EQ(ternary_pack(layout, p.codes.data(), rows, cols, p.packed.data(), p.packed.size()), Error::Ok);
  p.w.layout = layout;
  p.w.data = p.packed.data();
  p.w.size_bytes = p.packed.size();
  p.w.rows = rows;
  p.w.cols = cols;
  p.w.scale = 0.75f;
  p.x.q = p.q.data();
  p.x.scales = p.scales.data();
  p.x.sums = p.sums.data();
  p.x.tokens = tokens;
  p.x.cols = cols;
  p.x.stride = p.stride;
  return p;
}

std::vector<int32_t> expected_products(const Problem& p) {
  std::vector<int32_t> acc(p.tokens * p.rows);
  for (size_t t = 0; t < p.tokens; ++t)
    for (size_t r = 0; r < p.rows; ++r) {
      int32_t s = 0;
      for (size_t c = 0; c < p.cols; ++c) s += p.codes[r * p.cols + c] * p.q[t * p.stride + c];
      acc[t * p.rows + r] = s;
    }
  return acc;
}

const auto& kAllIsas = kIsaLevels;
// The layouts with SIMD kernels; each has its own kernel table (an ISA level without a
// kernel of its own for a layout runs the next one down, e.g. AVX-512 the AVX2 base-3 kernel).
const TernaryLayout kTiledLayouts[] = {TernaryLayout::T2Interleaved16, TernaryLayout::T3Interleaved16};
const TernaryLayout kAllLayouts[] = {TernaryLayout::T2RowMajor, TernaryLayout::T2Interleaved16,
                                     TernaryLayout::T3Interleaved16};

std::string layout_name(TernaryLayout layout) {
  return layout == TernaryLayout::T3Interleaved16 ? "t3i16" : layout == TernaryLayout::T2Interleaved16 ? "t2i16" : "t2";
}

struct Shape {
  size_t rows, cols, tokens;
};

// K below, equal to, above and not divisible by the 16- and 20-column tiles; odd N; token
// counts around each ISA's token tile (2, 4, 8).
const Shape kShapes[] = {
    {16, 16, 1},   {16, 5, 1},   {1, 1, 1},    {3, 15, 2},  {17, 17, 1},  {33, 31, 3},
    {31, 32, 4},   {16, 48, 5},  {47, 100, 8}, {16, 64, 9}, {5, 333, 17}, {129, 47, 2},
    {64, 256, 16}, {7, 1000, 7}, {16, 20, 1},  {17, 21, 3}, {18, 39, 5},  {32, 41, 9},
};

class TernaryKernelTest : public ::testing::TestWithParam<std::tuple<Isa, TernaryLayout, Shape>> {};

TEST_P(TernaryKernelTest, MatchesPlainDotProduct) {
  const auto [isa, layout, shape] = GetParam();
  if (!isa_supported(isa, cpu_features())) GTEST_SKIP() << to_string(isa) << " not supported here";
  Problem p = make_problem(shape.rows, shape.cols, shape.tokens, layout,
                           static_cast<uint32_t>(shape.rows * 7919 + shape.cols * 31 + shape.tokens));
  const auto expected = expected_products(p);
  std::vector<int32_t> acc(expected.size(), 12345);
  ASSERT_EQ(ternary_matmul_int32(isa, p.w, p.x, acc.data(), nullptr), Error::Ok);
  EXPECT_EQ(acc, expected);

  // Without precomputed sums the kernels compute them; the answer is the same.
  p.x.sums = nullptr;
  std::fill(acc.begin(), acc.end(), 12345);
  ASSERT_EQ(ternary_matmul_int32(isa, p.w, p.x, acc.data(), nullptr), Error::Ok);
  EXPECT_EQ(acc, expected);
}

INSTANTIATE_TEST_SUITE_P(AllIsas, TernaryKernelTest,
                         ::testing::Combine(::testing::ValuesIn(kAllIsas), ::testing::ValuesIn(kTiledLayouts),
                                            ::testing::ValuesIn(kShapes)),
                         [](const auto& info) {
                           const Shape s = std::get<2>(info.param);
                           return std::string(to_string(std::get<0>(info.param))) + "_" +
                                  layout_name(std::get<1>(info.param)) + "_" + std::to_string(s.rows) + "x" +
                                  std::to_string(s.cols) + "_t" + std::to_string(s.tokens);
                         });

// The bitnet-b1.58-2B-4T projections (out x in), decode and a short prefill, on two
// threads so the row split is exercised too.
class TernaryRealShapeTest : public ::testing::TestWithParam<Isa> {};

TEST_P(TernaryRealShapeTest, BitNet2B4TShapes) {
  const Isa isa = GetParam();
  if (!isa_supported(isa, cpu_features())) GTEST_SKIP() << to_string(isa) << " not supported here";
  if (isa == Isa::Scalar && slow_emulation()) GTEST_SKIP() << "scalar on full shapes is too slow under emulation";
  auto pool = ThreadPool::create(2);
  ASSERT_TRUE(pool.ok());
  const Shape shapes[] = {{2560, 2560, 1}, {640, 2560, 1}, {6912, 2560, 1}, {2560, 6912, 1}, {640, 2560, 9}};
  for (const Shape& s : shapes) {
    Problem p = make_problem(s.rows, s.cols, s.tokens, TernaryLayout::T2Interleaved16,
                             static_cast<uint32_t>(s.rows + s.cols), 0);
    const auto expected = expected_products(p);
    std::vector<int32_t> acc(expected.size());
    ASSERT_EQ(ternary_matmul_int32(isa, p.w, p.x, acc.data(), &*pool), Error::Ok);
    EXPECT_EQ(acc, expected) << s.cols << " -> " << s.rows << " x" << s.tokens;
  }
  // Base-3: the down projection's K (6912 = 20 * 345 + 12, a partial last tile) cut to
  // 640 rows, and a prefill; the odd shapes above cover the rest.
  for (const Shape& s : {Shape{640, 6912, 1}, Shape{640, 2560, 9}}) {
    Problem p = make_problem(s.rows, s.cols, s.tokens, TernaryLayout::T3Interleaved16,
                             static_cast<uint32_t>(s.rows + s.cols), 0);
    const auto expected = expected_products(p);
    std::vector<int32_t> acc(expected.size());
    ASSERT_EQ(ternary_matmul_int32(isa, p.w, p.x, acc.data(), &*pool), Error::Ok);
    EXPECT_EQ(acc, expected) << "t3i16 " << s.cols << " -> " << s.rows << " x" << s.tokens;
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, TernaryRealShapeTest, ::testing::ValuesIn(kAllIsas),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// Kernels that keep partial sums in int16 (AVX2, NEON) must widen them before they can
// overflow: every weight +1 (or -1) against every activation at +-127 is the largest
// sum a lane can reach, over K long enough for many widenings and K % 16 != 0.
class TernaryExtremeTest : public ::testing::TestWithParam<std::tuple<Isa, TernaryLayout>> {};

TEST_P(TernaryExtremeTest, LargestSumsDoNotOverflow) {
  const auto [isa, layout] = GetParam();
  if (!isa_supported(isa, cpu_features())) GTEST_SKIP() << to_string(isa) << " not supported here";
  for (size_t cols : {size_t{6912}, size_t{16 * 8 * 3 + 7}}) {
    for (size_t tokens : {size_t{1}, size_t{2}, size_t{5}}) {
      Problem p = make_problem(32, cols, tokens, layout, 1, 0);
      for (size_t r = 0; r < p.rows; ++r)
        for (size_t c = 0; c < cols; ++c) p.codes[r * cols + c] = r % 2 == 0 ? 1 : -1;
      for (size_t t = 0; t < tokens; ++t) {
        int32_t s = 0;
        for (size_t c = 0; c < cols; ++c) s += p.q[t * cols + c] = t % 2 == 0 ? 127 : -127;
        p.sums[t] = s;
      }
      ASSERT_EQ(ternary_pack(p.w.layout, p.codes.data(), p.rows, cols, p.packed.data(), p.packed.size()), Error::Ok);
      const auto expected = expected_products(p);
      ASSERT_EQ(std::abs(expected[0]), static_cast<int32_t>(127 * cols));
      std::vector<int32_t> acc(expected.size());
      ASSERT_EQ(ternary_matmul_int32(isa, p.w, p.x, acc.data(), nullptr), Error::Ok);
      EXPECT_EQ(acc, expected) << cols << " columns, " << tokens << " tokens";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, TernaryExtremeTest,
                         ::testing::Combine(::testing::ValuesIn(kAllIsas), ::testing::ValuesIn(kTiledLayouts)),
                         [](const auto& info) {
                           return std::string(to_string(std::get<0>(info.param))) + "_" +
                                  layout_name(std::get<1>(info.param));
                         });

// Every block kernel of both tiled layouts, by ISA level, for the entries the driver reaches
// only through whole matrices: a kernel's two_blocks entry must give, block by block, what the
// layout's scalar reference gives for each block alone.
struct BlockKernelCase {
  Isa isa;
  TernaryLayout layout;
  const TernaryBlockKernelInfo* kernel;
};
constexpr TernaryLayout kT2i = TernaryLayout::T2Interleaved16, kT3i = TernaryLayout::T3Interleaved16;
const BlockKernelCase kBlockKernels[] = {
    {Isa::Scalar, kT2i, &ternary_block_t2i16__scalar},     {Isa::Scalar, kT3i, &ternary_block_t3i16__scalar},
#if defined(__x86_64__)
    {Isa::Avx2, kT2i, &ternary_block_t2i16__avx2},         {Isa::Avx512Vnni, kT2i, &ternary_block_t2i16__avx512vnni},
    {Isa::Avx2, kT3i, &ternary_block_t3i16__avx2},
#endif
#if defined(__aarch64__)
    {Isa::Neon, kT2i, &ternary_block_t2i16__neon},         {Isa::NeonDot, kT2i, &ternary_block_t2i16__neondot},
    {Isa::NeonI8mm, kT2i, &ternary_block_t2i16__neoni8mm}, {Isa::Neon, kT3i, &ternary_block_t3i16__neon},
    {Isa::NeonDot, kT3i, &ternary_block_t3i16__neondot},
#endif
};

const TernaryBlockKernelInfo& scalar_reference(TernaryLayout layout) {
  return layout == kT3i ? ternary_block_t3i16__scalar : ternary_block_t2i16__scalar;
}

TEST(TernaryMatmul, TwoBlockEntriesEqualTheReferencePerBlock) {
  for (const BlockKernelCase& kc : kBlockKernels) {
    const TernaryBlockKernelInfo& k = *kc.kernel;
    const TernaryBlockKernelInfo& ref = scalar_reference(kc.layout);
    if (k.two_blocks == nullptr) continue;
    if (!isa_supported(kc.isa, cpu_features())) continue;
    for (size_t cols : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{100}, size_t{333}, size_t{2560}}) {
      for (size_t tokens = 1; tokens <= k.two_blocks_max_tokens; ++tokens) {
        Problem p = make_problem(32, cols, tokens, kc.layout, static_cast<uint32_t>(cols * 13 + tokens));
        const size_t block_bytes = p.packed.size() / 2;
        std::vector<int32_t> got(2 * tokens * 16, -1), want(2 * tokens * 16, -2);
        k.two_blocks(p.packed.data(), cols, p.q.data(), p.stride, tokens, got.data());
        for (size_t b = 0; b < 2; ++b)
          for (size_t t = 0; t < tokens; ++t)
            ref.fn(p.packed.data() + b * block_bytes, cols, p.q.data() + t * p.stride, p.stride, 1,
                   want.data() + (b * tokens + t) * 16);
        ASSERT_EQ(got, want) << to_string(kc.isa) << " " << layout_name(kc.layout) << " cols " << cols << " tokens "
                             << tokens;
      }
    }
  }
}

// And each kernel's token tile at every width it takes (the driver only reaches the widths its
// token counts leave over): all tokens at once equal the reference one token at a time.
TEST(TernaryMatmul, TokenTilesEqualTheReferencePerToken) {
  for (const BlockKernelCase& kc : kBlockKernels) {
    const TernaryBlockKernelInfo& k = *kc.kernel;
    const TernaryBlockKernelInfo& ref = scalar_reference(kc.layout);
    if (!isa_supported(kc.isa, cpu_features())) continue;
    for (size_t cols : {size_t{1}, size_t{15}, size_t{17}, size_t{100}, size_t{333}, size_t{2560}}) {
      for (size_t tokens = 1; tokens <= k.max_tokens; ++tokens) {
        Problem p = make_problem(16, cols, tokens, kc.layout, static_cast<uint32_t>(cols * 17 + tokens));
        std::vector<int32_t> got(tokens * 16, -1), want(tokens * 16, -2);
        k.fn(p.packed.data(), cols, p.q.data(), p.stride, tokens, got.data());
        for (size_t t = 0; t < tokens; ++t)
          ref.fn(p.packed.data(), cols, p.q.data() + t * p.stride, p.stride, 1, want.data() + t * 16);
        ASSERT_EQ(got, want) << to_string(kc.isa) << " " << layout_name(kc.layout) << " cols " << cols << " tokens "
                             << tokens;
      }
    }
  }
}

TEST(TernaryMatmul, ReferenceAgreesAcrossLayouts) {
  for (TernaryLayout layout : kAllLayouts) {
    Problem p = make_problem(37, 70, 3, layout, 11);
    std::vector<int32_t> acc(p.tokens * p.rows);
    ternary_matmul_int32_reference(p.w, p.x, acc.data());
    EXPECT_EQ(acc, expected_products(p)) << to_string(layout);
  }
}

// The float result is the exact product times both scales, through whichever kernels
// this CPU selected, with and without threads, written at y_stride.
TEST(TernaryMatmul, FloatOutputIsScaledExactProduct) {
  auto pool = ThreadPool::create(2);
  ASSERT_TRUE(pool.ok());
  for (TernaryLayout layout : kAllLayouts) {
    const ThreadPool* const pools[] = {nullptr, &*pool};
    for (const ThreadPool* threads : pools) {
      Problem p = make_problem(100, 257, 6, layout, 5);
      std::vector<int32_t> acc(p.tokens * p.rows);
      ternary_matmul_int32_reference(p.w, p.x, acc.data());
      const size_t y_stride = p.rows + 5;
      std::vector<float> y(p.tokens * y_stride, -999.0f);
      ternary_matmul(p.w, p.x, y.data(), y_stride, threads);
      for (size_t t = 0; t < p.tokens; ++t) {
        for (size_t r = 0; r < p.rows; ++r) {
          const float expected = p.w.scale * p.scales[t] * static_cast<float>(acc[t * p.rows + r]);
          ASSERT_FLOAT_EQ(y[t * y_stride + r], expected) << to_string(layout) << " t" << t << " r" << r;
        }
        for (size_t r = p.rows; r < y_stride; ++r) EXPECT_EQ(y[t * y_stride + r], -999.0f) << "wrote past rows";
      }
    }
  }
}

// Fused products of shared activations (q/k/v, gate/up) equal each matrix's exact product
// times both scales, for any split over threads, row counts not a multiple of the 16-row
// block, and both layouts (the reference layout runs unfused).
TEST(TernaryMatmul, FusedOutputsAreEachScaledExactProduct) {
  auto pool = ThreadPool::create(2);
  ASSERT_TRUE(pool.ok());
  for (TernaryLayout layout : kAllLayouts) {
    for (size_t tokens : {size_t{1}, size_t{5}}) {
      Problem parts[] = {make_problem(100, 257, tokens, layout, 11), make_problem(33, 257, tokens, layout, 12),
                         make_problem(16, 257, tokens, layout, 13)};
      const QuantizedActivations& x = parts[0].x;
      const ThreadPool* const pools[] = {nullptr, &*pool};
      for (const ThreadPool* threads : pools) {
        std::vector<std::vector<float>> y(3);
        TernaryMatmulOutput outputs[3];
        for (size_t i = 0; i < 3; ++i) {
          y[i].assign(tokens * (parts[i].rows + 2), -999.0f);
          outputs[i] = {&parts[i].w, y[i].data(), parts[i].rows + 2};
        }
        ternary_matmul_fused(outputs, 3, x, threads);
        for (size_t i = 0; i < 3; ++i) {
          std::vector<int32_t> acc(tokens * parts[i].rows);
          ternary_matmul_int32_reference(parts[i].w, x, acc.data());
          for (size_t t = 0; t < tokens; ++t) {
            for (size_t r = 0; r < parts[i].rows; ++r) {
              const float expected = parts[i].w.scale * x.scales[t] * static_cast<float>(acc[t * parts[i].rows + r]);
              ASSERT_FLOAT_EQ(y[i][t * outputs[i].y_stride + r], expected)
                  << to_string(layout) << " output " << i << " t" << t << " r" << r;
            }
            for (size_t r = parts[i].rows; r < outputs[i].y_stride; ++r)
              EXPECT_EQ(y[i][t * outputs[i].y_stride + r], -999.0f) << "wrote past rows";
          }
        }
      }
    }
  }
}

TEST(TernaryMatmul, ForcedIsaFloatOutput) {
  for (TernaryLayout layout : kTiledLayouts) {
    Problem p = make_problem(40, 90, 3, layout, 3);
    std::vector<int32_t> acc(p.tokens * p.rows);
    ternary_matmul_int32_reference(p.w, p.x, acc.data());
    for (Isa isa : kAllIsas) {
      std::vector<float> y(p.tokens * p.rows);
      const Error e = ternary_matmul_isa(isa, p.w, p.x, y.data(), p.rows, nullptr);
      if (!isa_supported(isa, cpu_features())) {
        EXPECT_EQ(e, Error::UnsupportedCpu);
        continue;
      }
      ASSERT_EQ(e, Error::Ok);
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_FLOAT_EQ(y[i], p.w.scale * p.scales[i / p.rows] * static_cast<float>(acc[i]))
            << to_string(isa) << " " << to_string(layout);
      }
    }
  }
}

TEST(TernaryMatmul, ActiveIsaIsSupported) {
  const Isa isa = ternary_active_isa();
  EXPECT_TRUE(isa_supported(isa, cpu_features())) << to_string(isa);
  if (std::getenv("TERN_ISA") == nullptr) {
    // The richest block kernel the CPU's features allow.
    const CpuFeatures& f = cpu_features();
    Isa want = Isa::Scalar;
#if defined(__x86_64__)
    if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni) {
      want = Isa::Avx512Vnni;
    } else if (f.avx2 && f.fma3 && f.f16c) {
      want = Isa::Avx2;
    }
#elif defined(__aarch64__)
    want = f.neon_i8mm && f.neon_dot ? Isa::NeonI8mm : f.neon_dot ? Isa::NeonDot : f.neon ? Isa::Neon : Isa::Scalar;
#endif
    EXPECT_EQ(isa, want) << to_string(isa);
    // The base-3 table tops out at AVX2 and dotprod.
    const Isa want_t3 = want == Isa::Avx512Vnni ? Isa::Avx2 : want == Isa::NeonI8mm ? Isa::NeonDot : want;
    EXPECT_EQ(ternary_active_isa(TernaryLayout::T3Interleaved16), want_t3);
  }
  EXPECT_EQ(ternary_active_isa(TernaryLayout::T2Interleaved16), isa);
  EXPECT_EQ(ternary_active_isa(TernaryLayout::T2RowMajor), Isa::Scalar);
}

// A mixed fused call (the two tiled layouts side by side) gives each matrix its own
// layout's kernel: every output equals its exact product.
TEST(TernaryMatmul, FusedMixesLayouts) {
  auto pool = ThreadPool::create(2);
  ASSERT_TRUE(pool.ok());
  Problem a = make_problem(48, 61, 3, TernaryLayout::T2Interleaved16, 21);
  Problem b = make_problem(35, 61, 3, TernaryLayout::T3Interleaved16, 22);
  b.x = a.x;
  std::vector<float> ya(3 * a.rows), yb(3 * b.rows);
  const TernaryMatmulOutput outputs[] = {{&a.w, ya.data(), a.rows}, {&b.w, yb.data(), b.rows}};
  ternary_matmul_fused(outputs, 2, a.x, &*pool);
  for (Problem* p : {&a, &b}) {
    std::vector<int32_t> acc(3 * p->rows);
    ternary_matmul_int32_reference(p->w, a.x, acc.data());
    const std::vector<float>& y = p == &a ? ya : yb;
    for (size_t i = 0; i < acc.size(); ++i)
      ASSERT_FLOAT_EQ(y[i], p->w.scale * a.scales[i / p->rows] * static_cast<float>(acc[i])) << to_string(p->w.layout);
  }
}

TEST(TernaryMatmul, ValidateCatchesBadMatrices) {
  Problem p = make_problem(20, 20, 1, TernaryLayout::T2Interleaved16, 1);
  EXPECT_EQ(ternary_matrix_validate(p.w), Error::Ok);
  TernaryMatrix w = p.w;
  w.data = nullptr;
  EXPECT_EQ(ternary_matrix_validate(w), Error::InvalidArgument);
  w = p.w;
  w.size_bytes = p.packed.size() - 1;  // padding is part of the layout
  EXPECT_EQ(ternary_matrix_validate(w), Error::Truncated);
  w = p.w;
  w.layout = static_cast<TernaryLayout>(77);
  EXPECT_EQ(ternary_matrix_validate(w), Error::UnsupportedType);
  w = p.w;
  w.rows = 0;
  EXPECT_EQ(ternary_matrix_validate(w), Error::ShapeMismatch);
  // Base-3: 20 x 20 is two row blocks of one 20-column tile (128 bytes; 2-bit needs 256).
  Problem b3 = make_problem(20, 20, 1, TernaryLayout::T3Interleaved16, 1);
  ASSERT_EQ(b3.packed.size(), 128u);
  EXPECT_EQ(ternary_matrix_validate(b3.w), Error::Ok);
  w = b3.w;
  w.size_bytes = 127;
  EXPECT_EQ(ternary_matrix_validate(w), Error::Truncated);
  w = b3.w;
  w.cols = 21;  // a second tile per block
  EXPECT_EQ(ternary_matrix_validate(w), Error::Truncated);
}

}  // namespace
}  // namespace tern
