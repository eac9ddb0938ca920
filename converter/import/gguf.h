// A bounds-checked reader for GGUF v2/v3 files (llama.cpp and bitnet.cpp): header,
// metadata key/values of every value type (arrays included), tensor infos and where
// each tensor's bytes are. It only describes the file; decoding tensor payloads into
// Tern's conventions is gguf_import's job.
//
// Every count, length and offset read from the file is checked against the bytes that
// remain before it is used, so a truncated or hostile file yields an error that names
// the file and the problem, never an out-of-bounds read or a giant allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "platform/error.h"
#include "platform/file_map.h"

namespace tern::convert::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
const char* value_type_name(ValueType t);

// GGML tensor types this reader knows the storage size of. Ids follow ggml.h; 36 is
// bitnet.cpp's I2_S (upstream llama.cpp never shipped a type under that id).
enum class TensorType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  I2_S = 36,
};

struct TypeTraits {
  const char* name;
  uint32_t block_elements;  // elements per block
  uint32_t block_bytes;     // bytes per block
};
// Nullptr for ids this reader does not know.
const TypeTraits* type_traits(uint32_t type_id);

// I2_S (bitnet.cpp): n/4 bytes of 2-bit codes, then one float32 scale, padded to 32 bytes.
inline constexpr uint64_t kI2sTrailerBytes = 32;

// One metadata value. Scalars live in the field matching their type family. Arrays of
// strings or arrays hold their elements in `items`; arrays of numbers or bools stay in the
// file (`raw`, `count` packed little-endian elements) and are read with number_at(), so a
// huge numeric array costs no memory.
struct Value {
  ValueType type = ValueType::U8;
  uint64_t u = 0;                          // U8, U16, U32, U64, Bool
  int64_t i = 0;                           // I8, I16, I32, I64
  double f = 0.0;                          // F32, F64
  std::string str;                         // String
  ValueType element_type = ValueType::U8;  // Array
  uint64_t count = 0;                      // Array: number of elements
  std::vector<Value> items;                // Array of String / Array
  const uint8_t* raw = nullptr;            // Array of numbers / bools

  bool is_integer() const;
  bool is_unsigned() const;
  bool is_float() const;
  // True for arrays whose elements are numbers or bools.
  bool is_numeric_array() const;
  // Element `index` (< count) of a numeric array, as a double.
  double number_at(uint64_t index) const;
};

struct KeyValue {
  std::string key;
  Value value;
};

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // GGML order: dims[0] is the innermost (contiguous) axis
  uint32_t type_id = 0;
  uint64_t offset = 0;  // relative to the data section, as stored
  uint64_t elements = 0;
  uint64_t bytes = 0;             // storage size implied by type and dims
  const uint8_t* data = nullptr;  // start of the tensor's bytes inside the file view

  TensorType type() const { return static_cast<TensorType>(type_id); }
};

class File {
 public:
  // Parses `size` bytes at `data` (not copied; must outlive the File). `name` names the
  // source in error messages.
  static Result<File> parse(const uint8_t* data, size_t size, const std::string& name);
  // Maps `path` and parses it; the File keeps the mapping alive.
  static Result<File> open(const std::string& path);

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // absolute start of the data section
  size_t size() const { return size_; }
  const std::vector<KeyValue>& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  const Value* find(const std::string& key) const;
  const TensorInfo* find_tensor(const std::string& name) const;

  // Typed lookups: NotFound if absent (message names file and key), InvalidArgument if the
  // stored type does not convert without loss.
  Result<uint64_t> get_uint(const std::string& key) const;
  Result<int64_t> get_int(const std::string& key) const;
  Result<double> get_float(const std::string& key) const;
  Result<std::string> get_string(const std::string& key) const;
  Result<bool> get_bool(const std::string& key) const;
  // Arrays: element types must match (strings) or be numeric (numbers).
  Result<std::vector<std::string>> get_string_array(const std::string& key) const;
  Result<std::vector<double>> get_number_array(const std::string& key) const;

 private:
  std::shared_ptr<MappedFile> mapping_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<KeyValue> metadata_;
  std::vector<TensorInfo> tensors_;
};

}  // namespace tern::convert::gguf
