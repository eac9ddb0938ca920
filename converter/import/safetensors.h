// Reader for Hugging Face safetensors files: 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets: [begin, end)}, "__metadata__": {...}}, then
// the data. Everything is bounds-checked against the file before it is returned.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "platform/error.h"
#include "platform/file_map.h"

namespace tern::convert {

enum class StDtype : uint8_t { U8, I8, F16, BF16, F32 };
const char* to_string(StDtype d);
size_t dtype_size(StDtype d);

struct StTensor {
  std::string name;
  StDtype dtype = StDtype::F32;
  std::vector<uint64_t> shape;
  const uint8_t* data = nullptr;  // into the mapped file
  uint64_t size = 0;
  uint64_t elements() const {
    uint64_t n = 1;
    for (uint64_t d : shape) n *= d;
    return n;
  }
};

class SafetensorsFile {
 public:
  // Maps and parses; errors name the file: Truncated, CorruptFile, UnsupportedType (dtype).
  static Result<SafetensorsFile> open(const std::string& path);
  // Parses an in-memory file (not owned; must outlive the object).
  static Result<SafetensorsFile> parse(const uint8_t* data, size_t size, const std::string& path);

  const std::string& path() const { return path_; }
  const StTensor* find(const std::string& name) const;
  const std::map<std::string, StTensor>& tensors() const { return tensors_; }

  // Values as float32 (F32/F16/BF16 only); errors name the file and tensor.
  Result<std::vector<float>> read_float(const StTensor& t) const;

 private:
  MappedFile file_;
  std::string path_;
  std::map<std::string, StTensor> tensors_;
};

}  // namespace tern::convert
