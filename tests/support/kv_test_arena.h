// A caller-owned arena for the KV cache tests (the kernel tests need none), and the small
// cache shape they share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "runtime/base/arena.h"
#include "runtime/kv/kv_policy.h"

namespace tern::testing {

// One cache's arena, optionally starting `misalign` bytes into its buffer.
struct KvTestArena {
  explicit KvTestArena(size_t bytes, size_t misalign = 0)
      : buffer(bytes + 64), arena(buffer.data() + misalign, bytes) {}
  std::vector<uint8_t> buffer;
  ArenaAllocator arena;
};

// One layer of 4 KV heads of 32 dims, f32 exact rows, S 4, W 8, G 4, value groups of 16:
// small enough to check position by position, large enough for every tier and eviction.
inline KvCacheProfile small_kv_profile(KvEviction eviction) {
  KvCacheProfile p;
  p.shape = KvShape{1, 4, 32};
  p.exact_type = KvType::F32;
  p.sink_tokens = 4;
  p.recent_window = 8;
  p.block_tokens = 4;
  p.value_group = 16;
  p.eviction = eviction;
  return p;
}

// A random cache layout for the byte-function tests: up to `max_layers` x `max_kv_heads`
// heads of 32, 64, 100 or 128 dims, f16 or f32 exact rows, 0..8 sinks, a 0..64 window,
// blocks and value groups of 8 << (0..max_shift).
inline void randomize_kv_layout(std::mt19937& rng, uint32_t max_layers, uint32_t max_kv_heads, uint32_t max_shift,
                                KvCacheProfile* p) {
  const uint32_t dims[] = {32, 64, 100, 128};
  p->shape = KvShape{static_cast<uint32_t>(1 + rng() % max_layers), static_cast<uint32_t>(1 + rng() % max_kv_heads),
                     dims[rng() % 4]};
  p->exact_type = rng() % 2 ? KvType::F16 : KvType::F32;
  p->sink_tokens = rng() % 9;
  p->recent_window = rng() % 65;
  p->block_tokens = 8u << (rng() % (max_shift + 1));
  p->value_group = 8u << (rng() % (max_shift + 1));
}

}  // namespace tern::testing
