// Stop strings: the check of generate()'s options and the filter that holds text back.
#include "runtime/engine/stop_strings.h"

#include <cstring>

namespace tern {

Error check_stop_strings(const char* const* stops, size_t count) {
  TERN_CHECK_OR_RETURN(count <= kMaxStopStrings, Error::InvalidArgument, "%zu stop strings (at most %zu)", count,
                       kMaxStopStrings);
  for (size_t i = 0; i < count; ++i) {
    TERN_CHECK_OR_RETURN(stops != nullptr && stops[i] != nullptr && std::strlen(stops[i]) <= kMaxStopStringBytes,
                         Error::InvalidArgument, "stop string %zu is null or longer than %zu bytes", i,
                         kMaxStopStringBytes);
  }
  return Error::Ok;
}

bool StopStringFilter::push(const char* text, size_t size, PieceCallback emit, void* user, bool* callback_stop) {
  for (size_t i = 0; i < size; ++i) {
    if (size_ == sizeof pending_) flush_bytes(1, emit, user, callback_stop);
    pending_[size_++] = text[i];
    for (size_t s = 0; s < count_; ++s) {
      const size_t n = std::strlen(stops_[s]);
      if (n > 0 && n <= size_ && std::memcmp(pending_ + size_ - n, stops_[s], n) == 0) {
        flush_bytes(size_ - n, emit, user, callback_stop);
        size_ = 0;
        return true;
      }
    }
  }
  // Keep the longest tail that is a proper prefix of some stop string.
  size_t keep = 0;
  for (size_t s = 0; s < count_; ++s) {
    const size_t n = std::strlen(stops_[s]);
    for (size_t k = n > size_ ? size_ : n - 1; k > keep; --k) {
      if (std::memcmp(pending_ + size_ - k, stops_[s], k) == 0) {
        keep = k;
        break;
      }
    }
  }
  flush_bytes(size_ - keep, emit, user, callback_stop);
  return false;
}

void StopStringFilter::flush_bytes(size_t n, PieceCallback emit, void* user, bool* callback_stop) {
  if (n == 0) return;
  if (emit != nullptr && !*callback_stop && !emit(pending_, n, user)) *callback_stop = true;
  std::memmove(pending_, pending_ + n, size_ - n);
  size_ -= n;
}

}  // namespace tern
