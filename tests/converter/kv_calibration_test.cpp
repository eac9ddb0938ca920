#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "converter/calibration/kv_calibration.h"
#include "converter/report/heatmap_png.h"
#include "tests/support/test_util.h"

namespace tern::kvcal {
namespace {

TEST(KvEntropyTest, HandComputedDistributions) {
  const float uniform4[] = {0.25f, 0.25f, 0.25f, 0.25f};
  EXPECT_NEAR(shannon_entropy_bits(uniform4, 4), 2.0, 1e-9);
  EXPECT_NEAR(renyi2_entropy_bits(uniform4, 4), 2.0, 1e-9);
  const float skewed[] = {0.5f, 0.25f, 0.25f};
  EXPECT_NEAR(shannon_entropy_bits(skewed, 3), 1.5, 1e-9);               // .5*1 + 2 * .25*2
  EXPECT_NEAR(renyi2_entropy_bits(skewed, 3), -std::log2(0.375), 1e-9);  // .25 + .0625 + .0625
  const float onehot[] = {0.0f, 1.0f, 0.0f};
  EXPECT_EQ(shannon_entropy_bits(onehot, 3), 0.0);
  EXPECT_EQ(renyi2_entropy_bits(onehot, 3), 0.0);
  const float unnormalized[] = {2.0f, 2.0f};  // renormalized to a fair coin
  EXPECT_NEAR(shannon_entropy_bits(unnormalized, 2), 1.0, 1e-9);
  // Rényi-2 never exceeds Shannon.
  const float mix[] = {0.7f, 0.1f, 0.1f, 0.05f, 0.05f};
  EXPECT_LT(renyi2_entropy_bits(mix, 5), shannon_entropy_bits(mix, 5));

  HeadEntropy head;
  head.add(uniform4, 4);
  head.add(onehot, 3);
  EXPECT_NEAR(head.mean_shannon(), 1.0, 1e-9);
  EXPECT_EQ(head.rows, 2u);
}

TEST(KvEntropyTest, ClassBoundaries) {
  EXPECT_EQ(classify_entropy(0.0), HeadClass::Sink);
  EXPECT_EQ(classify_entropy(0.49), HeadClass::Sink);
  EXPECT_EQ(classify_entropy(0.5), HeadClass::Focused);
  EXPECT_EQ(classify_entropy(1.49), HeadClass::Focused);
  EXPECT_EQ(classify_entropy(1.5), HeadClass::Moderate);
  EXPECT_EQ(classify_entropy(2.5), HeadClass::Mixed);
  EXPECT_EQ(classify_entropy(3.5), HeadClass::Mixed);
  EXPECT_EQ(classify_entropy(3.51), HeadClass::Diffuse);
  EXPECT_EQ(classify_entropy(6.6), HeadClass::Diffuse);
  EXPECT_STREQ(to_string(HeadClass::Moderate), "moderate");
}

TEST(KvEntropyTest, GqaCombination) {
  const std::vector<double> q = {1, 2, 3, 4, 8, 6, 7, 5};
  EXPECT_EQ(combine_gqa(q, 4, GqaCombine::Min), (std::vector<double>{1, 5}));
  EXPECT_EQ(combine_gqa(q, 4, GqaCombine::Mean), (std::vector<double>{2.5, 6.5}));
  EXPECT_EQ(combine_gqa(q, 1, GqaCombine::Min), q);
}

int sum(const Allocation& a) {
  int s = 0;
  for (uint8_t b : a.bits) s += b;
  return s;
}

TEST(KvAllocationTest, UniformHitsTheAverageExactly) {
  Allocation a = allocate_uniform(4, 4.0);
  EXPECT_EQ(a.bits, (std::vector<uint8_t>{4, 4, 4, 4}));
  EXPECT_TRUE(a.exact);
  // 5 heads at 2.6 bits = 13 bits: three 3-bit heads and two 2-bit heads.
  a = allocate_uniform(5, 2.6);
  EXPECT_TRUE(a.exact);
  EXPECT_EQ(sum(a), 13);
  EXPECT_EQ(std::count(a.bits.begin(), a.bits.end(), 3), 3);
  EXPECT_EQ(std::count(a.bits.begin(), a.bits.end(), 2), 2);
  // 2 heads at 5 bits: only 2 + 8 reaches 10.
  a = allocate_uniform(2, 5.0);
  EXPECT_TRUE(a.exact);
  EXPECT_EQ(sum(a), 10);
  EXPECT_EQ(std::count(a.bits.begin(), a.bits.end(), 8), 1);
  // 1 head at 6 bits is unreachable: the largest total below it (4) and not exact.
  a = allocate_uniform(1, 6.0);
  EXPECT_FALSE(a.exact);
  EXPECT_EQ(a.bits, (std::vector<uint8_t>{4}));
  // 150 heads (2B-4T) at 2.5 bits: exactly 375 bits.
  a = allocate_uniform(150, 2.5);
  EXPECT_TRUE(a.exact);
  EXPECT_EQ(sum(a), 375);
}

TEST(KvAllocationTest, EntropyRuleRepairsToTheExactAverage) {
  const std::vector<double> h2 = {0.5, 1.5, 2.5, 3.5};  // mean 2
  // alpha 1: targets 5.5, 4.5, 3.5, 2.5; at 16 bits the least-squares widths are all 4
  // (cost 5; 8+4+2+2 costs 9).
  Allocation a = allocate_entropy_rule(h2, 4.0, 1.0);
  EXPECT_EQ(a.bits, (std::vector<uint8_t>{4, 4, 4, 4}));
  // alpha 4: targets 10, 6, 2, -2; best at 16 bits is 8, 4, 2, 2 (cost 24; 8,3,3,2 costs 30).
  a = allocate_entropy_rule(h2, 4.0, 4.0);
  EXPECT_EQ(a.bits, (std::vector<uint8_t>{8, 4, 2, 2}));
  EXPECT_TRUE(a.exact);
  // alpha 0 is uniform.
  EXPECT_EQ(allocate_entropy_rule(h2, 3.0, 0.0).bits, (std::vector<uint8_t>{3, 3, 3, 3}));
}

TEST(KvAllocationTest, SensitivityMinimizesTotalErrorAtTheBudget) {
  // Head 0 is very sensitive; the others barely care. 12 bits: 8 + 2 + 2 (error 2.1)
  // beats 4 + 4 + 4 (10.4) and 8 + ... any other split.
  const std::vector<std::array<double, 4>> err = {{100, 50, 10, 0.1}, {1, 0.5, 0.2, 0.01}, {1, 0.5, 0.2, 0.01}};
  Allocation a = allocate_by_sensitivity(err, 4.0);
  EXPECT_EQ(a.bits, (std::vector<uint8_t>{8, 2, 2}));
  EXPECT_TRUE(a.exact);
  // With equal sensitivities the best split is the uniform one.
  const std::vector<std::array<double, 4>> same(3, {9, 4, 1, 0.004});
  EXPECT_EQ(allocate_by_sensitivity(same, 3.0).bits, (std::vector<uint8_t>{3, 3, 3}));
}

TEST(HeatmapColourTest, TheScaleHitsItsStopsClampsAndInterpolates) {
  // Scale 0..4 bits.
  EXPECT_EQ(heatmap_colour(0, 0, 4), (Rgb{68, 1, 84}));                 // vmin: the low stop
  EXPECT_EQ(heatmap_colour(4, 0, 4), (Rgb{253, 231, 37}));              // vmax: the high stop
  EXPECT_EQ(heatmap_colour(2, 0, 4), (Rgb{33, 145, 140}));              // midpoint: the middle stop
  EXPECT_EQ(heatmap_colour(std::nan(""), 0, 4), (Rgb{128, 128, 128}));  // NaN: missing
  EXPECT_EQ(heatmap_colour(9, 0, 4), (Rgb{253, 231, 37}));              // above vmax clamps
  EXPECT_EQ(heatmap_colour(-1, 0, 4), (Rgb{68, 1, 84}));                // below vmin clamps
  // A quarter of the way: halfway between low and middle stops, rounded.
  EXPECT_EQ(heatmap_colour(1, 0, 4), (Rgb{51, 73, 112}));  // (68+33)/2=50.5, (1+145)/2=73, (84+140)/2=112
}

}  // namespace
}  // namespace tern::kvcal
