#include "converter/import/gguf.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_set>

namespace tern::convert::gguf {

namespace {

// Limits that keep a hostile header from asking for absurd work or memory. Real files
// (a 128k-token vocabulary, ~300 tensors) stay far below them.
constexpr uint64_t kMaxArrayElements = uint64_t{1} << 24;
constexpr int kMaxArrayDepth = 2;  // an array of arrays, no deeper
constexpr uint64_t kMaxElementsPerTensor = uint64_t{1} << 48;

// Smallest encoded size of one key/value and one tensor info, used to reject counts the
// remaining bytes cannot possibly hold before anything is reserved.
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;

const TypeTraits* traits_table(uint32_t id) {
  static const TypeTraits kF32{"f32", 1, 4}, kF16{"f16", 1, 2}, kQ4_0{"q4_0", 32, 18}, kQ4_1{"q4_1", 32, 20},
      kQ5_0{"q5_0", 32, 22}, kQ5_1{"q5_1", 32, 24}, kQ8_0{"q8_0", 32, 34}, kQ8_1{"q8_1", 32, 36},
      kQ2_K{"q2_K", 256, 84}, kQ3_K{"q3_K", 256, 110}, kQ4_K{"q4_K", 256, 144}, kQ5_K{"q5_K", 256, 176},
      kQ6_K{"q6_K", 256, 210}, kQ8_K{"q8_K", 256, 292}, kIQ2_XXS{"iq2_xxs", 256, 66}, kIQ2_XS{"iq2_xs", 256, 74},
      kIQ3_XXS{"iq3_xxs", 256, 98}, kIQ1_S{"iq1_s", 256, 50}, kIQ4_NL{"iq4_nl", 32, 18}, kIQ3_S{"iq3_s", 256, 110},
      kIQ2_S{"iq2_s", 256, 82}, kIQ4_XS{"iq4_xs", 256, 136}, kI8{"i8", 1, 1}, kI16{"i16", 1, 2}, kI32{"i32", 1, 4},
      kI64{"i64", 1, 8}, kF64{"f64", 1, 8}, kIQ1_M{"iq1_m", 256, 56}, kBF16{"bf16", 1, 2}, kTQ1_0{"tq1_0", 256, 54},
      kTQ2_0{"tq2_0", 256, 66},
      // I2_S: 4 codes per byte; the per-tensor trailer is added in tensor_bytes().
      kI2_S{"i2_s", 4, 1};
  switch (id) {
    case 0: return &kF32;
    case 1: return &kF16;
    case 2: return &kQ4_0;
    case 3: return &kQ4_1;
    case 6: return &kQ5_0;
    case 7: return &kQ5_1;
    case 8: return &kQ8_0;
    case 9: return &kQ8_1;
    case 10: return &kQ2_K;
    case 11: return &kQ3_K;
    case 12: return &kQ4_K;
    case 13: return &kQ5_K;
    case 14: return &kQ6_K;
    case 15: return &kQ8_K;
    case 16: return &kIQ2_XXS;
    case 17: return &kIQ2_XS;
    case 18: return &kIQ3_XXS;
    case 19: return &kIQ1_S;
    case 20: return &kIQ4_NL;
    case 21: return &kIQ3_S;
    case 22: return &kIQ2_S;
    case 23: return &kIQ4_XS;
    case 24: return &kI8;
    case 25: return &kI16;
    case 26: return &kI32;
    case 27: return &kI64;
    case 28: return &kF64;
    case 29: return &kIQ1_M;
    case 30: return &kBF16;
    case 34: return &kTQ1_0;
    case 35: return &kTQ2_0;
    case 36: return &kI2_S;
    default: return nullptr;
  }
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return true;
  *out = a * b;
  return false;
}

// Sequential little-endian reader over [data, data + size) that never reads past the end.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& name) : data_(data), size_(size), name_(name) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  Error bytes(void* out, uint64_t n, const char* what) {
    if (n > remaining()) {
      return fail(Error::Truncated, "%s: truncated reading %s at byte %llu (needs %llu bytes, %llu left)",
                  name_.c_str(), what, static_cast<unsigned long long>(pos_), static_cast<unsigned long long>(n),
                  static_cast<unsigned long long>(remaining()));
    }
    if (n != 0) std::memcpy(out, data_ + pos_, n);
    pos_ += n;
    return Error::Ok;
  }
  // Skips `n` bytes, returning where they start.
  Error take(uint64_t n, const uint8_t** out, const char* what) {
    if (n > remaining()) {
      return fail(Error::Truncated, "%s: truncated reading %s at byte %llu (needs %llu bytes, %llu left)",
                  name_.c_str(), what, static_cast<unsigned long long>(pos_), static_cast<unsigned long long>(n),
                  static_cast<unsigned long long>(remaining()));
    }
    *out = data_ + pos_;
    pos_ += n;
    return Error::Ok;
  }
  template <typename T>
  Error scalar(T* out, const char* what) {
    return bytes(out, sizeof(T), what);
  }
  Error string(std::string* out, const char* what) {
    uint64_t length = 0;
    TERN_RETURN_IF_ERROR(scalar(&length, what));
    if (length > remaining()) {
      return fail(Error::Truncated, "%s: %s at byte %llu claims %llu bytes but only %llu remain", name_.c_str(), what,
                  static_cast<unsigned long long>(pos_ - 8), static_cast<unsigned long long>(length),
                  static_cast<unsigned long long>(remaining()));
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(length));
    pos_ += length;
    return Error::Ok;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& name_;
};

uint64_t min_encoded_bytes(ValueType t) {
  switch (t) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::Bool: return 1;
    case ValueType::U16:
    case ValueType::I16: return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32: return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64:
    case ValueType::String: return 8;
    case ValueType::Array: return 4 + 8;
  }
  return 1;
}

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::F64); }

Error read_value(Cursor& in, ValueType type, Value* out, int depth, const std::string& name, const std::string& key) {
  out->type = type;
  switch (type) {
    case ValueType::U8: {
      uint8_t v = 0;
      TERN_RETURN_IF_ERROR(in.scalar(&v, "a u8 value"));
      out->u = v;
      return Error::Ok;
    }
    case ValueType::I8: {
      int8_t v = 0;
      TERN_RETURN_IF_ERROR(in.scalar(&v, "an i8 value"));
      out->i = v;
      return Error::Ok;
    }
    case ValueType::U16: {
      uint16_t v = 0;
      TERN_RETURN_IF_ERROR(in.scalar(&v, "a u16 value"));
      out->u = v;
      return Error::Ok;
    }
    case ValueType::I16: {
      int16_t v = 0;
      TERN_RETURN_IF_ERROR(in.scalar(&v, "an i16 value"));
      out->i = v;
      return Error::Ok;
    }
    case ValueType::U32: {
      uint32_t v = 0;
      TERN_RETURN_IF_ERROR(in.scalar(&v, "a u32 value"));
      out->u = v;
      return Error::Ok;
    }
    case ValueType::I32: {
      int32_t v = 0;
      TERN_RETURN_IF_ERROR(in.scalar(&v, "an i32 value"));
      out->i = v;
      return Error::Ok;
    }
    case ValueType::U64: {
      uint64_t v = 0;
      TERN_RETURN_IF_ERROR(in.scalar(&v, "a u64 value"));
      out->u = v;
      return Error::Ok;
    }
    case ValueType::I64: {
      int64_t v = 0;
      TERN_RETURN_IF_ERROR(in.scalar(&v, "an i64 value"));
      out->i = v;
      return Error::Ok;
    }
    case ValueType::F32: {
      float v = 0;
      TERN_RETURN_IF_ERROR(in.scalar(&v, "an f32 value"));
      out->f = v;
      return Error::Ok;
    }
    case ValueType::F64: {
      double v = 0;
      TERN_RETURN_IF_ERROR(in.scalar(&v, "an f64 value"));
      out->f = v;
      return Error::Ok;
    }
    case ValueType::Bool: {
      uint8_t v = 0;
      TERN_RETURN_IF_ERROR(in.scalar(&v, "a bool value"));
      if (v > 1) {
        return fail(Error::CorruptFile, "%s: key '%s': bool value %u is neither 0 nor 1", name.c_str(), key.c_str(), v);
      }
      out->u = v;
      return Error::Ok;
    }
    case ValueType::String: return in.string(&out->str, "a string value");
    case ValueType::Array: {
      if (depth >= kMaxArrayDepth) {
        return fail(Error::NotSupported, "%s: key '%s': arrays nested deeper than %d levels", name.c_str(), key.c_str(),
                    kMaxArrayDepth);
      }
      uint32_t element_type = 0;
      uint64_t count = 0;
      TERN_RETURN_IF_ERROR(in.scalar(&element_type, "an array element type"));
      if (!valid_value_type(element_type)) {
        return fail(Error::CorruptFile, "%s: key '%s': unknown array element type %u", name.c_str(), key.c_str(),
                    element_type);
      }
      TERN_RETURN_IF_ERROR(in.scalar(&count, "an array length"));
      out->element_type = static_cast<ValueType>(element_type);
      const uint64_t min_bytes = min_encoded_bytes(out->element_type);
      if (count > kMaxArrayElements || count > in.remaining() / min_bytes) {
        return fail(count > kMaxArrayElements ? Error::OutOfRange : Error::Truncated,
                    "%s: key '%s': array of %llu %s elements does not fit in the %llu bytes left", name.c_str(),
                    key.c_str(), static_cast<unsigned long long>(count), value_type_name(out->element_type),
                    static_cast<unsigned long long>(in.remaining()));
      }
      out->count = count;
      if (out->element_type == ValueType::String || out->element_type == ValueType::Array) {
        out->items.resize(static_cast<size_t>(count));
        for (auto& item : out->items) {
          TERN_RETURN_IF_ERROR(read_value(in, out->element_type, &item, depth + 1, name, key));
        }
        return Error::Ok;
      }
      TERN_RETURN_IF_ERROR(in.take(count * min_bytes, &out->raw, "array elements"));
      if (out->element_type == ValueType::Bool) {
        for (uint64_t k = 0; k < count; ++k) {
          if (out->raw[k] > 1) {
            return fail(Error::CorruptFile, "%s: key '%s': bool element %llu is %u, neither 0 nor 1", name.c_str(),
                        key.c_str(), static_cast<unsigned long long>(k), out->raw[k]);
          }
        }
      }
      return Error::Ok;
    }
  }
  return fail(Error::CorruptFile, "%s: key '%s': unknown value type %u", name.c_str(), key.c_str(),
              static_cast<uint32_t>(type));
}

// Storage size of a tensor of `elements` of `traits`, or false on overflow / bad shape.
bool tensor_bytes(uint32_t type_id, const TypeTraits& traits, uint64_t elements, uint64_t* out) {
  if (elements % traits.block_elements != 0) return false;
  uint64_t bytes = 0;
  if (mul_overflows(elements / traits.block_elements, traits.block_bytes, &bytes)) return false;
  if (type_id == static_cast<uint32_t>(TensorType::I2_S)) bytes += kI2sTrailerBytes;
  *out = bytes;
  return true;
}

}  // namespace

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::Bool: return "bool";
    case ValueType::String: return "string";
    case ValueType::Array: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "unknown";
}

const TypeTraits* type_traits(uint32_t type_id) { return traits_table(type_id); }

bool Value::is_unsigned() const {
  return type == ValueType::U8 || type == ValueType::U16 || type == ValueType::U32 || type == ValueType::U64;
}
bool Value::is_integer() const {
  return is_unsigned() || type == ValueType::I8 || type == ValueType::I16 || type == ValueType::I32 ||
         type == ValueType::I64;
}
bool Value::is_float() const { return type == ValueType::F32 || type == ValueType::F64; }
bool Value::is_numeric_array() const {
  return type == ValueType::Array && element_type != ValueType::String && element_type != ValueType::Array;
}

double Value::number_at(uint64_t index) const {
  const uint8_t* p = raw + index * min_encoded_bytes(element_type);
  auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return static_cast<double>(v);
  };
  switch (element_type) {
    case ValueType::U8:
    case ValueType::Bool: return load(uint8_t{});
    case ValueType::I8: return load(int8_t{});
    case ValueType::U16: return load(uint16_t{});
    case ValueType::I16: return load(int16_t{});
    case ValueType::U32: return load(uint32_t{});
    case ValueType::I32: return load(int32_t{});
    case ValueType::F32: return load(float{});
    case ValueType::U64: return load(uint64_t{});
    case ValueType::I64: return load(int64_t{});
    case ValueType::F64: return load(double{});
    case ValueType::String:
    case ValueType::Array: break;
  }
  return 0.0;
}

namespace {

// The fixed header: the magic, a little-endian version 2 or 3, and the tensor and metadata counts.
Error read_header(Cursor& in, const std::string& fname, uint32_t* version, uint64_t* tensor_count, uint64_t* kv_count) {
  uint32_t magic = 0;
  TERN_RETURN_IF_ERROR(in.scalar(&magic, "the magic"));
  if (magic != kMagic) {
    return fail(Error::BadMagic, "%s: not a GGUF file (magic 0x%08x, expected 'GGUF')", fname.c_str(), magic);
  }
  TERN_RETURN_IF_ERROR(in.scalar(version, "the version"));
  const uint32_t swapped = __builtin_bswap32(*version);
  if (swapped == 2 || swapped == 3) {
    return fail(Error::NotSupported, "%s: big-endian GGUF (version %u) is not supported", fname.c_str(), swapped);
  }
  if (*version != 2 && *version != 3) {
    return fail(Error::VersionMismatch, "%s: GGUF version %u is not supported (only 2 and 3)", fname.c_str(), *version);
  }
  TERN_RETURN_IF_ERROR(in.scalar(tensor_count, "the tensor count"));
  TERN_RETURN_IF_ERROR(in.scalar(kv_count, "the metadata count"));
  return Error::Ok;
}

// `kv_count` metadata key/value pairs, no key twice.
Error read_metadata(Cursor& in, uint64_t kv_count, const std::string& fname, std::vector<KeyValue>* metadata) {
  if (kv_count > in.remaining() / kMinKeyValueBytes) {
    return fail(Error::Truncated, "%s: %llu metadata entries cannot fit in the %llu bytes left", fname.c_str(),
                static_cast<unsigned long long>(kv_count), static_cast<unsigned long long>(in.remaining()));
  }

  std::unordered_set<std::string> seen;
  metadata->reserve(static_cast<size_t>(kv_count));
  for (uint64_t k = 0; k < kv_count; ++k) {
    KeyValue kv;
    TERN_RETURN_IF_ERROR(in.string(&kv.key, "a metadata key"));
    if (!seen.insert(kv.key).second) {
      return fail(Error::CorruptFile, "%s: duplicate metadata key '%s'", fname.c_str(), kv.key.c_str());
    }
    uint32_t type = 0;
    TERN_RETURN_IF_ERROR(in.scalar(&type, "a metadata value type"));
    if (!valid_value_type(type)) {
      return fail(Error::CorruptFile, "%s: key '%s' has unknown value type %u", fname.c_str(), kv.key.c_str(), type);
    }
    TERN_RETURN_IF_ERROR(read_value(in, static_cast<ValueType>(type), &kv.value, 0, fname, kv.key));
    metadata->push_back(std::move(kv));
  }
  return Error::Ok;
}

// general.alignment: a u32 power of two.
Error check_alignment(const Value& a, const std::string& fname) {
  if (a.type != ValueType::U32) {
    return fail(Error::CorruptFile, "%s: general.alignment must be a u32, found %s", fname.c_str(),
                value_type_name(a.type));
  }
  if (a.u == 0 || (a.u & (a.u - 1)) != 0) {
    return fail(Error::CorruptFile, "%s: general.alignment %llu is not a power of two", fname.c_str(),
                static_cast<unsigned long long>(a.u));
  }
  return Error::Ok;
}

// `tensor_count` tensor infos, no name twice, each a whole number of its type's blocks per row
// at an offset that is a multiple of `alignment`.
Error read_tensor_infos(Cursor& in, uint64_t tensor_count, uint64_t alignment, const std::string& fname,
                        std::vector<TensorInfo>* tensors) {
  if (tensor_count > in.remaining() / kMinTensorInfoBytes) {
    return fail(Error::Truncated, "%s: %llu tensor infos cannot fit in the %llu bytes left", fname.c_str(),
                static_cast<unsigned long long>(tensor_count), static_cast<unsigned long long>(in.remaining()));
  }
  std::unordered_set<std::string> seen;
  tensors->reserve(static_cast<size_t>(tensor_count));
  for (uint64_t t = 0; t < tensor_count; ++t) {
    TensorInfo info;
    TERN_RETURN_IF_ERROR(in.string(&info.name, "a tensor name"));
    if (!seen.insert(info.name).second) {
      return fail(Error::CorruptFile, "%s: duplicate tensor '%s'", fname.c_str(), info.name.c_str());
    }
    uint32_t n_dims = 0;
    TERN_RETURN_IF_ERROR(in.scalar(&n_dims, "a tensor's dimension count"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return fail(Error::ShapeMismatch, "%s: tensor '%s' has %u dimensions (1..%u allowed)", fname.c_str(),
                  info.name.c_str(), n_dims, kMaxDims);
    }
    info.dims.resize(n_dims);
    info.elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      TERN_RETURN_IF_ERROR(in.scalar(&info.dims[d], "a tensor dimension"));
      if (mul_overflows(info.elements, info.dims[d], &info.elements) || info.elements > kMaxElementsPerTensor) {
        return fail(Error::OutOfRange, "%s: tensor '%s' has too many elements", fname.c_str(), info.name.c_str());
      }
    }
    TERN_RETURN_IF_ERROR(in.scalar(&info.type_id, "a tensor type"));
    TERN_RETURN_IF_ERROR(in.scalar(&info.offset, "a tensor offset"));
    const TypeTraits* traits = type_traits(info.type_id);
    if (traits == nullptr) {
      return fail(Error::UnsupportedType, "%s: tensor '%s' has unknown GGML type %u", fname.c_str(), info.name.c_str(),
                  info.type_id);
    }
    if (info.dims[0] % traits->block_elements != 0 ||
        !tensor_bytes(info.type_id, *traits, info.elements, &info.bytes)) {
      return fail(Error::ShapeMismatch,
                  "%s: tensor '%s' (%s): row of %llu elements is not a whole number of %u-element blocks",
                  fname.c_str(), info.name.c_str(), traits->name, static_cast<unsigned long long>(info.dims[0]),
                  traits->block_elements);
    }
    if (info.offset % alignment != 0) {
      return fail(Error::CorruptFile, "%s: tensor '%s' offset %llu is not a multiple of the alignment %llu",
                  fname.c_str(), info.name.c_str(), static_cast<unsigned long long>(info.offset),
                  static_cast<unsigned long long>(alignment));
    }
    tensors->push_back(std::move(info));
  }
  return Error::Ok;
}

// Points each tensor at its bytes in the data section [data_offset, size), which they must not run past.
Error place_tensor_data(const uint8_t* data, size_t size, uint64_t data_offset, const std::string& fname,
                        std::vector<TensorInfo>* tensors) {
  if (!tensors->empty() && data_offset > size) {
    return fail(Error::Truncated, "%s: data section starts at byte %llu, past the end of the %zu-byte file",
                fname.c_str(), static_cast<unsigned long long>(data_offset), size);
  }
  const uint64_t data_bytes = data_offset <= size ? size - data_offset : 0;
  for (auto& info : *tensors) {
    if (info.offset > data_bytes || info.bytes > data_bytes - info.offset) {
      return fail(
          Error::Truncated,
          "%s: tensor '%s' data (%llu bytes at data offset %llu) runs past the end of the file (%llu data bytes)",
          fname.c_str(), info.name.c_str(), static_cast<unsigned long long>(info.bytes),
          static_cast<unsigned long long>(info.offset), static_cast<unsigned long long>(data_bytes));
    }
    info.data = data + data_offset + info.offset;
  }
  return Error::Ok;
}

}  // namespace

Result<File> File::parse(const uint8_t* data, size_t size, const std::string& name) {
  File file;
  file.data_ = data;
  file.size_ = size;
  file.name_ = name;
  const std::string& fname = file.name_;
  Cursor in(data, size, fname);

  uint64_t tensor_count = 0, kv_count = 0;
  TERN_RETURN_IF_ERROR(read_header(in, fname, &file.version_, &tensor_count, &kv_count));
  TERN_RETURN_IF_ERROR(read_metadata(in, kv_count, fname, &file.metadata_));
  if (const Value* a = file.find("general.alignment")) {
    TERN_RETURN_IF_ERROR(check_alignment(*a, fname));
    file.alignment_ = a->u;
  }
  TERN_RETURN_IF_ERROR(read_tensor_infos(in, tensor_count, file.alignment_, fname, &file.tensors_));

  // The data section starts at the next multiple of the alignment after the infos.
  const uint64_t end_of_infos = in.pos();
  const uint64_t padding = (file.alignment_ - end_of_infos % file.alignment_) % file.alignment_;
  file.data_offset_ = end_of_infos + padding;
  TERN_RETURN_IF_ERROR(place_tensor_data(data, size, file.data_offset_, fname, &file.tensors_));
  return file;
}

Result<File> File::open(const std::string& path) {
  auto mapped = MappedFile::open(path.c_str());
  if (!mapped.ok()) {
    return fail(mapped.error(), "%s: cannot open: %s", path.c_str(), last_error_message());
  }
  auto mapping = std::make_shared<MappedFile>(std::move(mapped).value());
  TERN_ASSIGN_OR_RETURN(File file, parse(mapping->data(), mapping->size(), path));
  file.mapping_ = std::move(mapping);
  return file;
}

const Value* File::find(const std::string& key) const {
  for (const auto& kv : metadata_) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

const TensorInfo* File::find_tensor(const std::string& name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {
const Value* require(const File& f, const std::string& key, Error* err) {
  const Value* v = f.find(key);
  if (v == nullptr) *err = fail(Error::NotFound, "%s: metadata key '%s' is missing", f.name().c_str(), key.c_str());
  return v;
}
Error wrong_type(const File& f, const std::string& key, const Value& v, const char* wanted) {
  return fail(Error::InvalidArgument, "%s: metadata key '%s' is a %s, expected %s", f.name().c_str(), key.c_str(),
              value_type_name(v.type), wanted);
}
}  // namespace

Result<uint64_t> File::get_uint(const std::string& key) const {
  Error err = Error::Ok;
  const Value* v = require(*this, key, &err);
  if (v == nullptr) return err;
  if (v->is_unsigned()) return v->u;
  if (v->is_integer() && v->i >= 0) return static_cast<uint64_t>(v->i);
  return wrong_type(*this, key, *v, "a non-negative integer");
}

Result<int64_t> File::get_int(const std::string& key) const {
  Error err = Error::Ok;
  const Value* v = require(*this, key, &err);
  if (v == nullptr) return err;
  if (v->is_unsigned() && v->u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return static_cast<int64_t>(v->u);
  }
  if (v->is_integer() && !v->is_unsigned()) return v->i;
  return wrong_type(*this, key, *v, "an integer");
}

Result<double> File::get_float(const std::string& key) const {
  Error err = Error::Ok;
  const Value* v = require(*this, key, &err);
  if (v == nullptr) return err;
  if (v->is_float()) return v->f;
  if (v->is_unsigned()) return static_cast<double>(v->u);
  if (v->is_integer()) return static_cast<double>(v->i);
  return wrong_type(*this, key, *v, "a number");
}

Result<std::string> File::get_string(const std::string& key) const {
  Error err = Error::Ok;
  const Value* v = require(*this, key, &err);
  if (v == nullptr) return err;
  if (v->type != ValueType::String) return wrong_type(*this, key, *v, "a string");
  return v->str;
}

Result<bool> File::get_bool(const std::string& key) const {
  Error err = Error::Ok;
  const Value* v = require(*this, key, &err);
  if (v == nullptr) return err;
  if (v->type != ValueType::Bool) return wrong_type(*this, key, *v, "a bool");
  return v->u != 0;
}

Result<std::vector<std::string>> File::get_string_array(const std::string& key) const {
  Error err = Error::Ok;
  const Value* v = require(*this, key, &err);
  if (v == nullptr) return err;
  if (v->type != ValueType::Array || v->element_type != ValueType::String) {
    return wrong_type(*this, key, *v, "an array of strings");
  }
  std::vector<std::string> out;
  out.reserve(v->items.size());
  for (const auto& item : v->items) out.push_back(item.str);
  return out;
}

Result<std::vector<double>> File::get_number_array(const std::string& key) const {
  Error err = Error::Ok;
  const Value* v = require(*this, key, &err);
  if (v == nullptr) return err;
  if (!v->is_numeric_array()) return wrong_type(*this, key, *v, "an array of numbers");
  std::vector<double> out(static_cast<size_t>(v->count));
  for (uint64_t k = 0; k < v->count; ++k) out[k] = v->number_at(k);
  return out;
}

}  // namespace tern::convert::gguf
