#include "runtime/base/arena.h"

namespace tern {

const char* to_string(ArenaPurpose purpose) {
  switch (purpose) {
    case ArenaPurpose::Weights: return "weights";
    case ArenaPurpose::Tokenizer: return "tokenizer";
    case ArenaPurpose::Scratch: return "scratch";
    case ArenaPurpose::KvCache: return "kv_cache";
    case ArenaPurpose::Sampler: return "sampler";
    case ArenaPurpose::Other: return "other";
    case ArenaPurpose::SessionSlots: return "session_slots";
    case ArenaPurpose::kCount: break;
  }
  return "?";
}

void ArenaAllocator::reset(void* buffer, size_t capacity) {
  base_ = static_cast<uint8_t*>(buffer);
  capacity_ = buffer == nullptr ? 0 : capacity;
  used_ = 0;
  count_ = 0;
  for (auto& b : by_purpose_) b = 0;
}

ArenaAllocator::Mark ArenaAllocator::mark() const {
  Mark m;
  m.used = used_;
  m.count = count_;
  for (int i = 0; i < static_cast<int>(ArenaPurpose::kCount); ++i) m.by_purpose[i] = by_purpose_[i];
  return m;
}

void ArenaAllocator::release_to(const Mark& m) {
  if (m.used > used_) return;
  used_ = m.used;
  count_ = m.count;
  for (int i = 0; i < static_cast<int>(ArenaPurpose::kCount); ++i) by_purpose_[i] = m.by_purpose[i];
}

Result<void*> ArenaAllocator::allocate(size_t bytes, size_t alignment, ArenaPurpose purpose) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return fail(Error::InvalidArgument, "arena alignment %zu is not a power of two", alignment);
  }
  const uintptr_t base = reinterpret_cast<uintptr_t>(base_);
  const uintptr_t start = (base + used_ + alignment - 1) & ~(static_cast<uintptr_t>(alignment) - 1);
  const size_t offset = static_cast<size_t>(start - base);
  if (base_ == nullptr || offset > capacity_ || bytes > capacity_ - offset) {
    return fail(Error::ArenaExhausted, "arena: %zu bytes for %s do not fit (%zu of %zu used)", bytes,
                to_string(purpose), used_, capacity_);
  }
  used_ = offset + bytes;
  ++count_;
  by_purpose_[static_cast<int>(purpose)] += bytes;
  return static_cast<void*>(base_ + offset);
}

}  // namespace tern
