// The grammar compiler's region: the compiled grammar from its start up, temporaries from its
// end down, in one caller-owned block (nothing allocated).
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/error.h"
#include "runtime/base/arena.h"

namespace tern::grammar_detail {

// One block used from both ends; a mark taken on either end releases what came after it.
class Region {
 public:
  Region(void* base, size_t size) : base_(static_cast<uint8_t*>(base)), size_(size), hi_(size) {}
  template <typename T>
  T* low(size_t count) {
    const size_t start = align_up(lo_, alignof(T));
    if (count > (hi_ - (start < hi_ ? start : hi_)) / sizeof(T) || start > hi_) return nullptr;
    lo_ = start + count * sizeof(T);
    return reinterpret_cast<T*>(base_ + start);
  }
  template <typename T>
  T* high(size_t count) {
    if (count > hi_ / sizeof(T)) return nullptr;
    const size_t start = (hi_ - count * sizeof(T)) & ~static_cast<size_t>(63);
    if (start < lo_) return nullptr;
    hi_ = start;
    return reinterpret_cast<T*>(base_ + start);
  }
  size_t low_mark() const { return lo_; }
  void low_release(size_t mark) { lo_ = mark; }
  size_t high_mark() const { return hi_; }
  void high_release(size_t mark) { hi_ = mark; }
  size_t used() const { return lo_ + (size_ - hi_); }
  size_t size() const { return size_; }

 private:
  uint8_t* base_;
  size_t size_;
  size_t lo_ = 0;
  size_t hi_;
};

// GrammarTooLarge, naming what did not fit.
inline Error no_room(const Region& r, const char* what) {
  return fail(Error::GrammarTooLarge,
              "the grammar does not fit in its %zu bytes of memory (%s); reserve more "
              "(tern_model_params.grammar_bytes)",
              r.size(), what);
}

}  // namespace tern::grammar_detail
