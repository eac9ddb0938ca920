// Measures or carves a run of arena buffers with the same calls, so a plan's byte count and
// the buffers carved at load cannot disagree (the forward scratch, a session's slot).
#pragma once

#include <cstddef>

#include "platform/error.h"
#include "runtime/base/arena.h"

namespace tern {

// With no arena, each take() adds the buffer's padded size to *bytes and gives null;
// with one, it carves the buffer (*bytes untouched).
class ArenaCarver {
 public:
  static constexpr size_t kAlignment = 64;

  ArenaCarver(ArenaAllocator* arena, size_t* bytes) : arena_(arena), bytes_(bytes) {}
  bool measuring() const { return arena_ == nullptr; }

  template <typename T>
  Error take(T** out, size_t count, ArenaPurpose purpose = ArenaPurpose::Scratch) {
    const size_t n = count == 0 ? 1 : count;
    if (arena_ == nullptr) {
      *bytes_ += align_up(n * sizeof(T), kAlignment) + kAlignment;
      *out = nullptr;
      return Error::Ok;
    }
    TERN_ASSIGN_OR_RETURN(*out, arena_->allocate_array<T>(n, purpose, kAlignment));
    return Error::Ok;
  }

 private:
  ArenaAllocator* arena_;
  size_t* bytes_;
};

}  // namespace tern
