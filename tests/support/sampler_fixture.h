// A Sampler in an arena of its own, and parameters with every cut off: the sampler unit tests'
// starting point.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "runtime/base/arena.h"
#include "runtime/engine/sampler.h"

namespace tern::testing {

struct SamplerFixture {
  std::vector<uint8_t> memory = std::vector<uint8_t>(1 << 16);
  ArenaAllocator arena{memory.data(), memory.size()};
  Sampler sampler;
  SamplerFixture(uint32_t vocab, const SamplerParams& p) {
    EXPECT_EQ(sampler.init(vocab, arena), Error::Ok);
    EXPECT_EQ(sampler.configure(p), Error::Ok);
  }
};

// Only the temperature: no top-k, top-p, min-p or repetition penalty.
inline SamplerParams plain(float temperature) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  return p;
}

}  // namespace tern::testing
