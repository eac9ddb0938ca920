// A caller-owned arena for the KV cache tests (the kernel tests need none).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/arena.h"

namespace tern::testing {

// One cache's arena, optionally starting `misalign` bytes into its buffer.
struct KvTestArena {
  explicit KvTestArena(size_t bytes, size_t misalign = 0)
      : buffer(bytes + 64), arena(buffer.data() + misalign, bytes) {}
  std::vector<uint8_t> buffer;
  ArenaAllocator arena;
};

}  // namespace tern::testing
