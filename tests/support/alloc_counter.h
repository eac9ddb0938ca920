// Counts heap calls for tests that prove "no allocation after load". A test binary that
// compiles alloc_counter.cpp interposes malloc/calloc/realloc/free/aligned allocation and
// operator new/delete; calls made from any thread while an AllocCounter is alive are counted.
// Not usable under the sanitizers, whose allocators interpose the same functions.
#pragma once

namespace tern::test {

class AllocCounter {
 public:
  AllocCounter();   // resets the count and starts counting
  ~AllocCounter();  // stops counting
  AllocCounter(const AllocCounter&) = delete;
  AllocCounter& operator=(const AllocCounter&) = delete;
  long calls() const;
};

}  // namespace tern::test
