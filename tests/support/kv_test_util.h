// Shared helpers for the KV tests: ISA parameters and random data.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/kv_quant.h"

namespace tern::testing {

inline std::vector<Isa> all_kv_isas() { return std::vector<Isa>(std::begin(kIsaLevels), std::end(kIsaLevels)); }
inline std::string kv_isa_name(const ::testing::TestParamInfo<Isa>& info) { return to_string(info.param); }

// Gaussian-ish data with a few outlier channels, like real keys.
inline std::vector<float> kv_random_rows(uint32_t rows, uint32_t dim, uint32_t seed, float outlier = 8.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows) * dim);
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t c = 0; c < dim; ++c) {
      const float boost = (c % 17 == 3) ? outlier : 1.0f;
      x[static_cast<size_t>(r) * dim + c] = normal(rng) * boost + (c % 5 == 0 ? 2.0f : 0.0f);
    }
  }
  return x;
}

}  // namespace tern::testing
