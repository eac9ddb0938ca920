// One block of memory, owned by the caller or allocated once at load, handed out by a
// bump allocator. Every allocation names its purpose so the runtime can report where
// each byte went (like TFLM's recording allocator) without any heap use of its own.
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/error.h"

namespace tern {

enum class ArenaPurpose : int {
  Weights = 0,  // weights copied into the arena (never when the bundle is mmap'd)
  Tokenizer,
  Scratch,  // activations and per-token buffers
  KvCache,
  Sampler,
  Other,
  SessionSlots,  // a model's regions for its sessions (each slot reports by purpose itself)
  kCount,
};
const char* to_string(ArenaPurpose purpose);

class ArenaAllocator {
 public:
  ArenaAllocator() = default;
  ArenaAllocator(void* buffer, size_t capacity) { reset(buffer, capacity); }

  // Starts over on a new buffer; forgets every allocation and the records.
  void reset(void* buffer, size_t capacity);

  // Returns `bytes` bytes aligned to `alignment` (a power of two), or ArenaExhausted.
  Result<void*> allocate(size_t bytes, size_t alignment, ArenaPurpose purpose);
  template <typename T>
  Result<T*> allocate_array(size_t count, ArenaPurpose purpose, size_t alignment = alignof(T)) {
    if (count != 0 && sizeof(T) > SIZE_MAX / count) {
      return fail(Error::ArenaExhausted, "array of %zu elements overflows size_t", count);
    }
    TERN_ASSIGN_OR_RETURN(void* p,
                          allocate(count * sizeof(T), alignment < alignof(T) ? alignof(T) : alignment, purpose));
    return static_cast<T*>(p);
  }

  size_t capacity() const { return capacity_; }
  // Bytes handed out, alignment padding included.
  size_t used_bytes() const { return used_; }
  size_t free_bytes() const { return capacity_ - used_; }
  // Bytes requested for one purpose (without padding).
  size_t used_bytes(ArenaPurpose purpose) const { return by_purpose_[static_cast<int>(purpose)]; }
  size_t allocation_count() const { return count_; }

  // A point to roll back to: everything allocated after it is forgotten (records included).
  struct Mark {
    size_t used = 0;
    size_t count = 0;
    size_t by_purpose[static_cast<int>(ArenaPurpose::kCount)] = {};
  };
  Mark mark() const;
  void release_to(const Mark& mark);

 private:
  uint8_t* base_ = nullptr;
  size_t capacity_ = 0;
  size_t used_ = 0;
  size_t count_ = 0;
  size_t by_purpose_[static_cast<int>(ArenaPurpose::kCount)] = {};
};

// Counts what a sequence of allocations will need, so a plan can be made before the
// real arena exists: call the same code with a measuring allocator first.
inline size_t align_up(size_t n, size_t alignment) { return (n + alignment - 1) & ~(alignment - 1); }

}  // namespace tern
