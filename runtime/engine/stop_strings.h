// Stop strings: generated text is held back while it could still become one, so a stop
// string is never emitted (even partly) and everything else is emitted as early as possible.
#pragma once

#include <cstddef>

#include "platform/error.h"

namespace tern {

inline constexpr size_t kMaxStopStrings = 8;
inline constexpr size_t kMaxStopStringBytes = 64;

// Receives UTF-8 text as it is generated (always whole characters). Return false to stop.
using PieceCallback = bool (*)(const char* text, size_t size, void* user_data);

// InvalidArgument when there are more than kMaxStopStrings, or one is null or longer than
// kMaxStopStringBytes.
Error check_stop_strings(const char* const* stops, size_t count);

class StopStringFilter {
 public:
  // `stops` (checked by check_stop_strings) must outlive the filter.
  StopStringFilter(const char* const* stops, size_t count) : stops_(stops), count_(count) {}

  // Appends text; returns true when a stop string completed (text before it is emitted).
  // Emitted text goes to `emit` until it returns false, which sets *callback_stop.
  bool push(const char* text, size_t size, PieceCallback emit, void* user, bool* callback_stop);
  void finish(PieceCallback emit, void* user, bool* callback_stop) { flush_bytes(size_, emit, user, callback_stop); }

 private:
  void flush_bytes(size_t n, PieceCallback emit, void* user, bool* callback_stop);

  const char* const* stops_;
  size_t count_;
  char pending_[2 * kMaxStopStringBytes + 64];
  size_t size_ = 0;
};

}  // namespace tern
