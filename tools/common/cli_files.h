// Whole text files read into memory, as the host CLIs take their inputs.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace tern::cli {

// The bytes of the file at `path`; false when it cannot be opened.
inline bool read_file(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

}  // namespace tern::cli
