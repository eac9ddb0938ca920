// Whole text files read into memory, as the host CLIs take their inputs.
#pragma once

#include <string>

#include "platform/file_map.h"

namespace tern::cli {

// The bytes of the regular file at `path`; false when it cannot be read, with the reason (a
// FIFO, a device, a directory, a socket, a missing file) in *why when not null. A FIFO is
// refused, never waited on (tern::read_whole_file).
inline bool read_file(const std::string& path, std::string* out, std::string* why = nullptr) {
  auto text = read_whole_file(path.c_str());
  if (!text.ok()) {
    if (why != nullptr) *why = last_error_message();
    return false;
  }
  *out = std::move(text).value();
  return true;
}

}  // namespace tern::cli
