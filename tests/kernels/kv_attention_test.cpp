#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/dense_matmul.h"
#include "kernels/kv_attention.h"
#include "kernels/kv_ukernels.h"
#include "tests/support/kv_test_util.h"

namespace tern {
namespace {

using testing::kv_random_rows;

// A history of [sinks exact f32] + [quantized blocks, the last possibly partial] +
// [recent exact f16], and the same history dequantized to floats for the reference.
struct History {
  uint32_t head_dim;
  KvQuantLayout layout;
  std::vector<float> sink_k, sink_v;
  std::vector<std::vector<uint8_t>> key_blocks, value_blocks;
  std::vector<uint16_t> recent_k, recent_v;
  std::vector<KvSegment> segs;
  std::vector<float> ref_k, ref_v;  // every token, dequantized
  uint32_t tokens = 0;
};

History make_history(uint32_t head_dim, KvQuantLayout layout, uint32_t sinks, uint32_t blocks, uint32_t last_block,
                     uint32_t recent, uint32_t seed) {
  History h;
  h.head_dim = head_dim;
  h.layout = layout;
  const uint32_t G = layout.block_tokens;
  h.sink_k = kv_random_rows(sinks, head_dim, seed);
  h.sink_v = kv_random_rows(sinks, head_dim, seed + 1, 2.0f);
  h.segs.push_back({KvSegmentKind::ExactF32, sinks, h.sink_k.data(), h.sink_v.data()});
  h.ref_k = h.sink_k;
  h.ref_v = h.sink_v;
  const size_t value_row = kv_value_row_bytes(layout.value_bits, head_dim, layout.value_group);
  for (uint32_t b = 0; b < blocks; ++b) {
    const auto k = kv_random_rows(G, head_dim, seed + 10 + b);
    const auto v = kv_random_rows(G, head_dim, seed + 1000 + b, 2.0f);
    h.key_blocks.emplace_back(kv_key_block_bytes(layout.key_bits, head_dim, G) + kKvReadPadding);
    h.value_blocks.emplace_back(G * value_row + kKvReadPadding);
    kv_quantize_key_block(Isa::Scalar, k.data(), G, head_dim, layout.key_bits, h.key_blocks.back().data());
    for (uint32_t t = 0; t < G; ++t)
      kv_quantize_value_row(Isa::Scalar, v.data() + t * head_dim, head_dim, layout.value_group, layout.value_bits,
                            h.value_blocks.back().data() + t * value_row);
  }
  for (uint32_t b = 0; b < blocks; ++b) {
    const uint32_t used = b + 1 == blocks ? last_block : G;
    h.segs.push_back({KvSegmentKind::Quantized, used, h.key_blocks[b].data(), h.value_blocks[b].data()});
    std::vector<float> k(static_cast<size_t>(used) * head_dim), v(head_dim);
    kv_dequantize_key_block(h.key_blocks[b].data(), G, head_dim, layout.key_bits, 0, used, k.data());
    h.ref_k.insert(h.ref_k.end(), k.begin(), k.end());
    for (uint32_t t = 0; t < used; ++t) {
      kv_dequantize_value_row(h.value_blocks[b].data() + t * value_row, head_dim, layout.value_group, layout.value_bits,
                              v.data());
      h.ref_v.insert(h.ref_v.end(), v.begin(), v.end());
    }
  }
  const auto rk = kv_random_rows(recent, head_dim, seed + 7), rv = kv_random_rows(recent, head_dim, seed + 8, 2.0f);
  for (float x : rk) h.recent_k.push_back(f32_to_f16(x));
  for (float x : rv) h.recent_v.push_back(f32_to_f16(x));
  for (uint16_t x : h.recent_k) h.ref_k.push_back(f16_to_f32(x));
  for (uint16_t x : h.recent_v) h.ref_v.push_back(f16_to_f32(x));
  h.segs.push_back({KvSegmentKind::ExactF16, recent, h.recent_k.data(), h.recent_v.data()});
  h.tokens = static_cast<uint32_t>(h.ref_k.size() / head_dim);
  return h;
}

// Dequantize-then-attend in double precision.
std::vector<double> reference_attention(const History& h, const std::vector<float>& q, double scale) {
  const uint32_t D = h.head_dim;
  std::vector<double> s(h.tokens), out(D, 0.0);
  double mx = -1e300;
  for (uint32_t t = 0; t < h.tokens; ++t) {
    double dot = 0;
    for (uint32_t c = 0; c < D; ++c) dot += static_cast<double>(q[c]) * h.ref_k[static_cast<size_t>(t) * D + c];
    s[t] = dot * scale;
    mx = std::max(mx, s[t]);
  }
  double sum = 0;
  for (auto& x : s) sum += (x = std::exp(x - mx));
  for (uint32_t t = 0; t < h.tokens; ++t)
    for (uint32_t c = 0; c < D; ++c) out[c] += s[t] / sum * h.ref_v[static_cast<size_t>(t) * D + c];
  return out;
}

class KvAttentionIsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam(), cpu_features())) GTEST_SKIP() << to_string(GetParam()) << " not supported here";
  }
};

TEST_P(KvAttentionIsaTest, MatchesDequantizeThenAttend) {
  struct Case {
    uint32_t head_dim, key_bits, value_bits, G, group, sinks, blocks, last, recent;
  };
  const Case cases[] = {
      {64, 4, 4, 32, 32, 4, 3, 32, 16}, {128, 2, 2, 32, 32, 4, 4, 17, 32}, {100, 3, 8, 16, 32, 1, 5, 16, 7},
      {32, 8, 3, 64, 8, 2, 2, 64, 5},   {128, 4, 2, 64, 128, 4, 1, 1, 1},  {20, 2, 4, 8, 16, 3, 3, 5, 9},
  };
  uint32_t seed = 11;
  for (const Case& c : cases) {
    const KvQuantLayout layout{c.key_bits, c.value_bits, c.G, c.group};
    ASSERT_EQ(kv_format_validate(c.key_bits, c.value_bits, c.head_dim, c.G, c.group), Error::Ok);
    const History h = make_history(c.head_dim, layout, c.sinks, c.blocks, c.last, c.recent, seed += 50);
    const auto q = kv_random_rows(1, c.head_dim, seed + 3, 1.0f);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    std::vector<float> scores(h.tokens), out(c.head_dim);
    kv_attend(GetParam(), h.segs.data(), h.segs.size(), layout, c.head_dim, q.data(), scale, scores.data(), out.data());
    const auto want = reference_attention(h, q, scale);
    // Float32 sums of head_dim products (|q|,|k| ~ a few units, outliers x8) carry a
    // relative error ~ head_dim * 2^-24 ≈ 1e-5 in each score; through softmax that moves
    // each weight by ~1e-5 relative, so the output moves by ~1e-5 * max|v| (~10).
    double max_v = 0;
    for (float v : h.ref_v) max_v = std::max(max_v, static_cast<double>(std::fabs(v)));
    for (uint32_t i = 0; i < c.head_dim; ++i)
      ASSERT_NEAR(out[i], want[i], 2e-5 * max_v + 1e-6) << "dim " << c.head_dim << " channel " << i;
    double psum = 0;
    for (float p : scores) psum += p;
    EXPECT_NEAR(psum, 1.0, 1e-5);
  }
}

TEST_P(KvAttentionIsaTest, SegmentScoresMatchScalarPerSegment) {
  const KvQuantLayout layout{3, 2, 32, 32};
  const History h = make_history(128, layout, 4, 2, 32, 8, 999);
  const auto q = kv_random_rows(1, 128, 5, 1.0f);
  for (const KvSegment& seg : h.segs) {
    std::vector<float> want(seg.tokens), got(seg.tokens);
    kv_segment_scores(Isa::Scalar, seg, layout, 128, q.data(), 0.125f, want.data());
    kv_segment_scores(GetParam(), seg, layout, 128, q.data(), 0.125f, got.data());
    for (uint32_t t = 0; t < seg.tokens; ++t) ASSERT_NEAR(got[t], want[t], 1e-4 * (1 + std::fabs(want[t])));
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, KvAttentionIsaTest, ::testing::ValuesIn(testing::all_kv_isas()), testing::kv_isa_name);

// The rotation leaves q·k unchanged and the rotated-back output equals the unrotated one.
TEST(KvAttentionRotationTest, RotationIsTransparentForExactRows) {
  const uint32_t D = 64, T = 40;
  auto k = kv_random_rows(T, D, 1), v = kv_random_rows(T, D, 2), q = kv_random_rows(1, D, 3, 1.0f);
  const KvQuantLayout layout{};
  std::vector<float> s1(T), o1(D), s2(T), o2(D);
  KvSegment plain{KvSegmentKind::ExactF32, T, k.data(), v.data()};
  kv_attend(Isa::Scalar, &plain, 1, layout, D, q.data(), 0.125f, s1.data(), o1.data());
  for (uint32_t t = 0; t < T; ++t) {
    kv_hadamard_rotate(k.data() + t * D, D);
    kv_hadamard_rotate(v.data() + t * D, D);
  }
  kv_hadamard_rotate(q.data(), D);
  KvSegment rotated{KvSegmentKind::ExactF32, T, k.data(), v.data()};
  kv_attend(Isa::Scalar, &rotated, 1, layout, D, q.data(), 0.125f, s2.data(), o2.data());
  kv_hadamard_rotate(o2.data(), D);
  for (uint32_t i = 0; i < D; ++i) ASSERT_NEAR(o1[i], o2[i], 1e-4);
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

class KvMultiQueryIsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam(), cpu_features())) GTEST_SKIP() << to_string(GetParam()) << " not supported here";
  }
};

// Every one of the 65,536 halves widens to the float an independent conversion gives (a block's
// channel minimums and steps go through this before the scores).
TEST_P(KvMultiQueryIsaTest, HalvesWidenExactly) {
  std::vector<uint16_t> all(1u << 16);
  for (uint32_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> got(all.size() + 3, -1.0f);
  kv_attention_ukernels(GetParam()).halves_to_floats(all.data() + 3, static_cast<uint32_t>(all.size() - 3), got.data());
  for (uint32_t i = 3; i < all.size(); ++i) {
    const float want = f16_to_f32(all[i]);  // the dense path's conversion, written separately
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got[i - 3])) << std::hex << all[i];
    } else {
      ASSERT_EQ(0, std::memcmp(&want, &got[i - 3], 4)) << std::hex << all[i] << " " << want << " " << got[i - 3];
    }
  }
  EXPECT_EQ(got[all.size() - 3], -1.0f);  // nothing written past n
}

// Several query heads through one pass over the blocks give what each would alone.
TEST_P(KvMultiQueryIsaTest, GroupedQueriesMatchOneAtATime) {
  for (uint32_t head_dim : {128u, 100u, 32u}) {
    const KvQuantLayout layout{3, 4, 16, 32};
    const History h = make_history(head_dim, layout, 2, 3, 11, 5, head_dim);
    for (uint32_t queries : {1u, 2u, 3u, 4u, 6u}) {
      const auto q = kv_random_rows(queries, head_dim, 77 + queries, 1.0f);
      const size_t stride = h.tokens + 3;
      std::vector<float> scores(queries * stride), probs(queries * stride), out(queries * head_dim, 0.0f);
      size_t at = 0;
      for (const KvSegment& seg : h.segs) {
        kv_segment_scores_multi(GetParam(), seg, layout, head_dim, q.data(), queries, 0.1f, scores.data() + at, stride);
        at += seg.tokens;
      }
      for (uint32_t i = 0; i < queries; ++i) {
        std::vector<float> want(h.tokens);
        at = 0;
        for (const KvSegment& seg : h.segs) {
          kv_segment_scores(GetParam(), seg, layout, head_dim, q.data() + i * head_dim, 0.1f, want.data() + at);
          at += seg.tokens;
        }
        for (uint32_t t = 0; t < h.tokens; ++t)
          ASSERT_NEAR(scores[i * stride + t], want[t], 1e-4 * (1 + std::fabs(want[t]))) << queries << " q" << i;
        for (uint32_t t = 0; t < h.tokens; ++t) probs[i * stride + t] = 1.0f / (1 + t + i);
      }
      at = 0;
      for (const KvSegment& seg : h.segs) {
        kv_segment_accumulate_multi(GetParam(), seg, layout, head_dim, probs.data() + at, stride, queries, out.data());
        at += seg.tokens;
      }
      for (uint32_t i = 0; i < queries; ++i) {
        std::vector<float> want(head_dim, 0.0f);
        at = 0;
        for (const KvSegment& seg : h.segs) {
          kv_segment_accumulate(GetParam(), seg, layout, head_dim, probs.data() + i * stride + at, want.data());
          at += seg.tokens;
        }
        for (uint32_t c = 0; c < head_dim; ++c)
          ASSERT_NEAR(out[i * head_dim + c], want[c], 1e-4 * (1 + std::fabs(want[c]))) << queries << " q" << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, KvMultiQueryIsaTest, ::testing::ValuesIn(testing::all_kv_isas()), testing::kv_isa_name);

}  // namespace
}  // namespace tern
