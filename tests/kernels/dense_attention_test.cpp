// Dense attention kernels (f32 and f16 caches): every ISA equals the definition (keys as
// rows, each sum in index order, multiply then add) bit for bit, across odd head dims, group
// sizes, lengths and capacities (partial key blocks, positions past the last whole block
// stored as rows).
#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/dense_attention.h"
#include "kernels/dense_matmul.h"
#include "tests/support/kv_test_util.h"

namespace tern {
namespace {

class DenseAttentionIsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam(), cpu_features())) GTEST_SKIP() << to_string(GetParam()) << " not supported here";
  }
};

struct Shape {
  uint32_t head_dim, queries, len, capacity;
};
const Shape kShapes[] = {
    {32, 4, 1, 1},      {32, 4, 8, 8},      {32, 4, 9, 16},     {48, 1, 17, 19}, {64, 2, 40, 45},
    {128, 4, 100, 128}, {128, 4, 203, 203}, {128, 5, 64, 70},   {80, 3, 33, 40}, {20, 8, 15, 24},
    {72, 4, 31, 31},    {96, 2, 7, 7},      {128, 1, 250, 256}, {36, 4, 24, 26},
};

// Keys as rows [p][i] stored into the cache's layout.
template <typename Element>
std::vector<Element> block_layout(const std::vector<Element>& rows, uint32_t head_dim, uint32_t capacity) {
  std::vector<Element> keys(static_cast<size_t>(capacity) * head_dim, Element(0x7e00));  // NaN either way
  for (uint32_t p = 0; p < rows.size() / head_dim; ++p)
    for (uint32_t i = 0; i < head_dim; ++i) keys[kv_key_index(p, i, head_dim, capacity)] = rows[p * head_dim + i];
  return keys;
}

// The cache's elements, and what they are as f32.
template <typename Element>
std::vector<Element> stored(const std::vector<float>& x);
template <>
std::vector<float> stored(const std::vector<float>& x) {
  return x;
}
template <>
std::vector<uint16_t> stored(const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = f32_to_f16(x[i]);
  return h;
}
inline float widen(float x) { return x; }
inline float widen(uint16_t x) { return f16_to_f32(x); }

void run_scores(Isa isa, const float* q, uint32_t queries, uint32_t hd, const float* keys, uint32_t len,
                uint32_t capacity, float scale, float* out, size_t stride) {
  dense_attention_scores(isa, q, queries, hd, keys, len, capacity, scale, out, stride);
}
void run_scores(Isa isa, const float* q, uint32_t queries, uint32_t hd, const uint16_t* keys, uint32_t len,
                uint32_t capacity, float scale, float* out, size_t stride) {
  dense_attention_scores_f16(isa, q, queries, hd, keys, len, capacity, scale, out, stride);
}
void run_values(Isa isa, const float* probs, size_t p_stride, uint32_t queries, const float* values, uint32_t hd,
                uint32_t len, float* out) {
  dense_attention_values(isa, probs, p_stride, queries, values, hd, len, out);
}
void run_values(Isa isa, const float* probs, size_t p_stride, uint32_t queries, const uint16_t* values, uint32_t hd,
                uint32_t len, float* out) {
  dense_attention_values_f16(isa, probs, p_stride, queries, values, hd, len, out);
}

template <typename Element>
void check_scores(Isa isa) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "head_dim " << s.head_dim << " queries " << s.queries << " len " << s.len
                                      << " capacity " << s.capacity << " element bytes " << sizeof(Element));
    const auto rows = stored<Element>(testing::kv_random_rows(s.len, s.head_dim, 11 + s.len));
    const auto q = testing::kv_random_rows(s.queries, s.head_dim, 7 + s.head_dim);
    const auto keys = block_layout(rows, s.head_dim, s.capacity);
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    const size_t stride = s.capacity + 3;
    std::vector<float> want(s.queries * stride, -1.0f), got(s.queries * stride, -1.0f);
    for (uint32_t j = 0; j < s.queries; ++j) {
      for (uint32_t p = 0; p < s.len; ++p) {
        float dot = 0.0f;
        for (uint32_t i = 0; i < s.head_dim; ++i) dot += q[j * s.head_dim + i] * widen(rows[p * s.head_dim + i]);
        want[j * stride + p] = dot * scale;
      }
    }
    run_scores(isa, q.data(), s.queries, s.head_dim, keys.data(), s.len, s.capacity, scale, got.data(), stride);
    // Past len, up to the end of its key block when that block is stored blocked, the kernels
    // may score the padding (NaN keys here); nothing further is written.
    const uint32_t blocked = s.capacity / kKvKeyBlock * kKvKeyBlock;
    const uint32_t block_end = (s.len + kKvKeyBlock - 1) / kKvKeyBlock * kKvKeyBlock;
    const uint32_t scored = block_end <= blocked ? block_end : s.len;
    for (uint32_t j = 0; j < s.queries; ++j)
      for (uint32_t p = s.len; p < scored; ++p) got[j * stride + p] = -1.0f;
    ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
  }
}

template <typename Element>
void check_values(Isa isa) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "head_dim " << s.head_dim << " queries " << s.queries << " len " << s.len
                                      << " element bytes " << sizeof(Element));
    const auto values = stored<Element>(testing::kv_random_rows(s.len, s.head_dim, 5 + s.len));
    const size_t p_stride = s.capacity + 1;
    std::vector<float> probs(s.queries * p_stride);
    for (size_t i = 0; i < probs.size(); ++i) probs[i] = 1.0f / static_cast<float>(3 + (i * 7919) % 61);
    std::vector<float> want(s.queries * s.head_dim), got(s.queries * s.head_dim, NAN);
    for (uint32_t j = 0; j < s.queries; ++j) {
      for (uint32_t i = 0; i < s.head_dim; ++i) {
        float acc = 0.0f;
        for (uint32_t p = 0; p < s.len; ++p) acc += probs[j * p_stride + p] * widen(values[p * s.head_dim + i]);
        want[j * s.head_dim + i] = acc;
      }
    }
    run_values(isa, probs.data(), p_stride, s.queries, values.data(), s.head_dim, s.len, got.data());
    ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
  }
}

TEST_P(DenseAttentionIsaTest, ScoresEqualTheDefinitionBitForBit) { check_scores<float>(GetParam()); }
TEST_P(DenseAttentionIsaTest, ValuesEqualTheDefinitionBitForBit) { check_values<float>(GetParam()); }
TEST_P(DenseAttentionIsaTest, F16ScoresEqualTheDefinitionBitForBit) { check_scores<uint16_t>(GetParam()); }
TEST_P(DenseAttentionIsaTest, F16ValuesEqualTheDefinitionBitForBit) { check_values<uint16_t>(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Isa, DenseAttentionIsaTest, ::testing::ValuesIn(testing::all_kv_isas()), testing::kv_isa_name);

}  // namespace
}  // namespace tern
