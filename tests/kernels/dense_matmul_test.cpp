// Dense GEMV (embedding / lm_head) per ISA against a double-precision dot product over
// weights decoded in the test.
#include "kernels/dense_matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace tern {
namespace {

const auto& kAllIsas = kIsaLevels;

struct DenseCase {
  DenseType type;
  size_t rows, cols, group;
};

struct DenseProblem {
  std::vector<uint8_t> data;
  std::vector<float> scales;
  std::vector<double> decoded;  // rows x cols, what the weights mean
  DenseMatrix m;
};

DenseProblem make_dense(const DenseCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> w(c.rows * c.cols);
  for (auto& v : w) v = dist(rng);
  DenseProblem p;
  p.decoded.resize(w.size());
  p.data.resize(dense_data_size(c.type, c.rows, c.cols));
  switch (c.type) {
    case DenseType::F32:
      std::memcpy(p.data.data(), w.data(), p.data.size());
      for (size_t i = 0; i < w.size(); ++i) p.decoded[i] = w[i];
      break;
    case DenseType::F16:
    case DenseType::BF16: {
      auto* h = reinterpret_cast<uint16_t*>(p.data.data());
      for (size_t i = 0; i < w.size(); ++i) {
        h[i] = c.type == DenseType::F16 ? f32_to_f16(w[i]) : f32_to_bf16(w[i]);
        p.decoded[i] = c.type == DenseType::F16 ? f16_to_f32(h[i]) : bf16_to_f32(h[i]);
      }
      break;
    }
    // Quantized layouts straight from random codes and scales (the converter's quantizer is
    // tested with the bundle writer): what the kernels must read is the layout itself.
    case DenseType::Q8: {
      p.scales.resize(dense_scale_count(c.type, c.rows, c.cols, c.group));
      auto* q = reinterpret_cast<int8_t*>(p.data.data());
      std::uniform_int_distribution<int> code(-127, 127);
      for (size_t i = 0; i < w.size(); ++i) q[i] = static_cast<int8_t>(code(rng));
      for (auto& s : p.scales) s = std::fabs(dist(rng)) / 127.0f;
      const size_t groups = (c.cols + c.group - 1) / c.group;
      for (size_t r = 0; r < c.rows; ++r)
        for (size_t col = 0; col < c.cols; ++col)
          p.decoded[r * c.cols + col] = static_cast<double>(q[r * c.cols + col]) * p.scales[r * groups + col / c.group];
      break;
    }
    case DenseType::Q4: {
      p.scales.resize(dense_scale_count(c.type, c.rows, c.cols, c.group));
      std::uniform_int_distribution<int> byte(0, 255);
      for (auto& b : p.data) b = static_cast<uint8_t>(byte(rng));
      for (auto& s : p.scales) s = std::fabs(dist(rng)) / 7.0f;
      const size_t groups = (c.cols + c.group - 1) / c.group, row_bytes = (c.cols + 1) / 2;
      if (c.cols % 2 != 0) {  // an odd row's last high nibble is padding, stored as code 0
        for (size_t r = 0; r < c.rows; ++r)
          p.data[r * row_bytes + row_bytes - 1] = (p.data[r * row_bytes + row_bytes - 1] & 0xf) | 0x80;
      }
      for (size_t r = 0; r < c.rows; ++r)
        for (size_t col = 0; col < c.cols; ++col) {
          const int v = ((p.data[r * row_bytes + col / 2] >> (4 * (col % 2))) & 0xf) - 8;
          p.decoded[r * c.cols + col] = static_cast<double>(v) * p.scales[r * groups + col / c.group];
        }
      break;
    }
  }
  p.m.type = c.type;
  p.m.data = p.data.data();
  p.m.size_bytes = p.data.size();
  p.m.scales = p.scales.empty() ? nullptr : p.scales.data();
  p.m.rows = c.rows;
  p.m.cols = c.cols;
  p.m.group = c.group;
  return p;
}

// Shapes around the vector widths (4, 8, 16 floats) and the four-row blocking; Q8 groups
// that do (64, 16, 8) and do not (12, 5) fit whole vectors.
const DenseCase kCases[] = {
    {DenseType::F32, 1, 1, 0},     {DenseType::F32, 5, 7, 0},    {DenseType::F32, 9, 100, 0},
    {DenseType::F32, 33, 2560, 0}, {DenseType::F16, 3, 15, 0},   {DenseType::F16, 4, 16, 0},
    {DenseType::F16, 13, 333, 0},  {DenseType::BF16, 6, 40, 0},  {DenseType::BF16, 7, 129, 0},
    {DenseType::Q8, 5, 64, 64},    {DenseType::Q8, 9, 2560, 64}, {DenseType::Q8, 4, 48, 16},
    {DenseType::Q8, 3, 24, 8},     {DenseType::Q8, 6, 36, 12},   {DenseType::Q8, 5, 23, 5},
    {DenseType::Q4, 5, 64, 32},    {DenseType::Q4, 3, 9, 4},
};

class DenseGemvTest : public ::testing::TestWithParam<std::tuple<Isa, DenseCase>> {};

TEST_P(DenseGemvTest, MatchesDoublePrecision) {
  const auto [isa, c] = GetParam();
  if (!isa_supported(isa, cpu_features())) GTEST_SKIP() << to_string(isa) << " not supported here";
  DenseProblem p = make_dense(c, static_cast<uint32_t>(c.rows * 977 + c.cols));
  ASSERT_EQ(dense_matrix_validate(p.m), Error::Ok);
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(c.cols);
  for (auto& v : x) v = dist(rng);
  std::vector<float> y(c.rows, -1234.0f);
  ASSERT_EQ(dense_gemv_f32_isa(isa, p.m, x.data(), y.data(), nullptr), Error::Ok);
  for (size_t r = 0; r < c.rows; ++r) {
    double expected = 0, magnitude = 0;
    for (size_t col = 0; col < c.cols; ++col) {
      expected += p.decoded[r * c.cols + col] * x[col];
      magnitude += std::fabs(p.decoded[r * c.cols + col] * x[col]);
    }
    EXPECT_NEAR(y[r], expected, 1e-5 * magnitude + 1e-6) << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, DenseGemvTest,
                         ::testing::Combine(::testing::ValuesIn(kAllIsas), ::testing::ValuesIn(kCases)),
                         [](const auto& info) {
                           const DenseCase c = std::get<1>(info.param);
                           return std::string(to_string(std::get<0>(info.param))) + "_" + to_string(c.type) + "_" +
                                  std::to_string(c.rows) + "x" + std::to_string(c.cols) + "_g" +
                                  std::to_string(c.group);
                         });

// The integer path (int8 activations per weight group): every ISA against the double
// reference within the activation-rounding bound Σ_c |w_c| * (amax_g / 127) / 2, and against
// the scalar integer kernel to float rounding. Groups that are not whole vectors take the
// f32 path, bit for bit.
const DenseCase kI8Cases[] = {
    {DenseType::Q8, 5, 64, 64},   {DenseType::Q8, 9, 2560, 64}, {DenseType::Q8, 6, 96, 32},
    {DenseType::Q8, 7, 256, 128}, {DenseType::Q4, 5, 64, 64},   {DenseType::Q4, 9, 2560, 64},
    {DenseType::Q4, 3, 256, 128}, {DenseType::Q4, 6, 192, 64},  {DenseType::Q8, 4, 48, 16},
    {DenseType::Q4, 5, 64, 32},   {DenseType::Q8, 3, 100, 50},
};

class DenseGemvI8Test : public ::testing::TestWithParam<std::tuple<Isa, DenseCase>> {};

TEST_P(DenseGemvI8Test, WithinActivationRoundingOfDoublePrecision) {
  const auto [isa, c] = GetParam();
  if (!isa_supported(isa, cpu_features())) GTEST_SKIP() << to_string(isa) << " not supported here";
  DenseProblem p = make_dense(c, static_cast<uint32_t>(c.rows * 131 + c.cols));
  if (c.type == DenseType::Q8) {  // the one value a symmetric quantizer never writes
    reinterpret_cast<int8_t*>(p.data.data())[1] = -128;
    p.decoded[1] = -128.0 * p.scales[0];
  }
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(c.cols);
  for (auto& v : x) v = dist(rng);
  x[0] = 9.0f;  // an outlier, as final hidden states have
  std::vector<float> y(c.rows, -1234.0f), scalar(c.rows, -1234.0f);
  ASSERT_EQ(dense_gemv_i8_isa(isa, p.m, x.data(), y.data(), nullptr), Error::Ok);
  ASSERT_EQ(dense_gemv_i8_isa(Isa::Scalar, p.m, x.data(), scalar.data(), nullptr), Error::Ok);
  if (!dense_gemv_i8_applies(p.m)) {
    std::vector<float> f32(c.rows);
    ASSERT_EQ(dense_gemv_f32_isa(isa, p.m, x.data(), f32.data(), nullptr), Error::Ok);
    EXPECT_EQ(y, f32);
    return;
  }
  for (size_t r = 0; r < c.rows; ++r) {
    double expected = 0, magnitude = 0, bound = 0;
    for (size_t g = 0; g < c.cols / c.group; ++g) {
      double amax = 0;
      for (size_t col = g * c.group; col < (g + 1) * c.group; ++col) amax = std::max(amax, std::fabs(double{x[col]}));
      for (size_t col = g * c.group; col < (g + 1) * c.group; ++col) {
        const double w = p.decoded[r * c.cols + col];
        expected += w * x[col];
        magnitude += std::fabs(w * x[col]);
        bound += std::fabs(w) * amax / 127.0 / 2.0;
      }
    }
    EXPECT_NEAR(y[r], expected, bound + 1e-5 * magnitude) << "row " << r;
    EXPECT_NEAR(y[r], scalar[r], 1e-5 * magnitude) << "row " << r;
    EXPECT_GT(std::fabs(y[r] - static_cast<float>(expected)), 0.0f)
        << "row " << r << ": activations were not quantized";
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, DenseGemvI8Test,
                         ::testing::Combine(::testing::ValuesIn(kAllIsas), ::testing::ValuesIn(kI8Cases)),
                         [](const auto& info) {
                           const DenseCase c = std::get<1>(info.param);
                           return std::string(to_string(std::get<0>(info.param))) + "_" + to_string(c.type) + "_" +
                                  std::to_string(c.rows) + "x" + std::to_string(c.cols) + "_g" +
                                  std::to_string(c.group);
                         });

// Several tokens at once (dense_gemv_i8_tokens): each token's outputs equal its own GEMV's bit
// for bit, on every ISA and type (f32/f16/bf16 and groups the i8 path does not take included),
// with one and two threads, and with row counts across the 256-row tiles.
class DenseGemvTokensTest : public ::testing::TestWithParam<std::tuple<Isa, DenseCase>> {};

TEST_P(DenseGemvTokensTest, EachTokenEqualsItsOwnGemv) {
  const auto [isa, c] = GetParam();
  if (!isa_supported(isa, cpu_features())) GTEST_SKIP() << to_string(isa) << " not supported here";
  DenseProblem p = make_dense(c, static_cast<uint32_t>(c.rows * 71 + c.cols));
  auto pool = ThreadPool::create(2);
  ASSERT_TRUE(pool.ok());
  // The x86 q4 kernels take up to four tokens a pass and sixteen a call: 5, 7 and 18 tokens
  // end on a remainder of 1, 3 and 2.
  constexpr size_t kMaxTokens = 18, kStride = 2600;  // rows of x wider than cols, as the forward scratch's
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(kMaxTokens * kStride);
  for (auto& v : x) v = dist(rng);
  std::vector<uint8_t> work(dense_gemv_tokens_work_bytes(c.cols, kMaxTokens));
  const ThreadPool* const pools[] = {nullptr, &*pool};
  for (size_t tokens : {size_t{5}, size_t{7}, kMaxTokens}) {
    std::vector<std::vector<float>> y(tokens, std::vector<float>(c.rows, -1.0f));
    std::vector<float*> outputs(tokens);
    for (size_t t = 0; t < tokens; ++t) outputs[t] = y[t].data();
    for (const ThreadPool* threads : pools) {
      ASSERT_EQ(dense_gemv_i8_tokens_isa(isa, p.m, x.data(), kStride, tokens, outputs.data(), work.data(), threads),
                Error::Ok);
      for (size_t t = 0; t < tokens; ++t) {
        std::vector<float> alone(c.rows, -2.0f);
        ASSERT_EQ(dense_gemv_i8_isa(isa, p.m, x.data() + t * kStride, alone.data(), nullptr), Error::Ok);
        ASSERT_EQ(0, std::memcmp(alone.data(), y[t].data(), c.rows * sizeof(float)))
            << "token " << t << " of " << tokens;
      }
    }
  }
}

const DenseCase kTokenCases[] = {
    {DenseType::Q4, 600, 2560, 64}, {DenseType::Q4, 3, 256, 128},  {DenseType::Q8, 513, 256, 64},
    {DenseType::Q8, 6, 36, 12},     {DenseType::F16, 300, 333, 0}, {DenseType::F32, 9, 100, 0},
    {DenseType::BF16, 7, 129, 0},
};

INSTANTIATE_TEST_SUITE_P(AllIsas, DenseGemvTokensTest,
                         ::testing::Combine(::testing::ValuesIn(kAllIsas), ::testing::ValuesIn(kTokenCases)),
                         [](const auto& info) {
                           const DenseCase c = std::get<1>(info.param);
                           return std::string(to_string(std::get<0>(info.param))) + "_" + to_string(c.type) + "_" +
                                  std::to_string(c.rows) + "x" + std::to_string(c.cols) + "_g" +
                                  std::to_string(c.group);
                         });

// The selected kernels, split over two threads, agree with the single-threaded scalar run.
TEST(DenseGemv, ThreadedSelectedIsaMatchesScalar) {
  auto pool = ThreadPool::create(2);
  ASSERT_TRUE(pool.ok());
  for (DenseType type : {DenseType::F16, DenseType::Q8}) {
    DenseProblem p = make_dense({type, 1000, 256, 64}, 9);
    std::vector<float> x(256);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i));
    std::vector<float> y(1000), ref(1000);
    dense_gemv_f32(p.m, x.data(), y.data(), &*pool);
    ASSERT_EQ(dense_gemv_f32_isa(Isa::Scalar, p.m, x.data(), ref.data(), nullptr), Error::Ok);
    for (size_t r = 0; r < y.size(); ++r) EXPECT_NEAR(y[r], ref[r], 1e-4f * (1.0f + std::fabs(ref[r]))) << r;
  }
  for (DenseType type : {DenseType::Q8, DenseType::Q4}) {
    DenseProblem p = make_dense({type, 1000, 256, 64}, 10);
    std::vector<float> x(256);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(static_cast<float>(i));
    std::vector<float> y(1000), ref(1000);
    dense_gemv_i8(p.m, x.data(), y.data(), &*pool);
    ASSERT_EQ(dense_gemv_i8_isa(Isa::Scalar, p.m, x.data(), ref.data(), nullptr), Error::Ok);
    for (size_t r = 0; r < y.size(); ++r) EXPECT_NEAR(y[r], ref[r], 1e-4f * (1.0f + std::fabs(ref[r]))) << r;
  }
}

}  // namespace
}  // namespace tern
