// A caller-owned arena for the KV cache tests (the kernel tests need none), and the small
// cache shape they share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/arena.h"
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

}  // namespace tern::testing
