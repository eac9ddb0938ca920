#include "converter/import/safetensors.h"

#include <nlohmann/json.hpp>

#include <cstring>

#include "kernels/dense_matmul.h"

namespace tern::convert {

const char* to_string(StDtype d) {
  switch (d) {
    case StDtype::U8: return "U8";
    case StDtype::I8: return "I8";
    case StDtype::F16: return "F16";
    case StDtype::BF16: return "BF16";
    case StDtype::F32: return "F32";
  }
  return "?";
}

size_t dtype_size(StDtype d) {
  switch (d) {
    case StDtype::U8:
    case StDtype::I8: return 1;
    case StDtype::F16:
    case StDtype::BF16: return 2;
    case StDtype::F32: return 4;
  }
  return 0;
}

namespace {

constexpr uint64_t kMaxHeader = 100ull << 20;

bool parse_dtype(const std::string& s, StDtype* out) {
  static const std::pair<const char*, StDtype> known[] = {
      {"U8", StDtype::U8}, {"I8", StDtype::I8}, {"F16", StDtype::F16}, {"BF16", StDtype::BF16}, {"F32", StDtype::F32}};
  for (const auto& k : known) {
    if (s == k.first) {
      *out = k.second;
      return true;
    }
  }
  return false;
}

}  // namespace

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto mapped = MappedFile::open(path.c_str());
  if (!mapped.ok()) return mapped.error();
  const uint8_t* data = mapped->data();
  const size_t size = mapped->size();
  TERN_ASSIGN_OR_RETURN(SafetensorsFile f, parse(data, size, path));
  f.file_ = std::move(mapped).value();
  return f;
}

Result<SafetensorsFile> SafetensorsFile::parse(const uint8_t* data, size_t size, const std::string& path) {
  const char* p = path.c_str();
  if (size < 8) return fail(Error::Truncated, "%s: %zu bytes, too short for a safetensors header", p, size);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];
  if (header_len > kMaxHeader) {
    return fail(Error::CorruptFile, "%s: safetensors header length %llu is implausible (corrupt or not safetensors)", p,
                static_cast<unsigned long long>(header_len));
  }
  if (header_len > size - 8) {
    return fail(Error::Truncated, "%s: safetensors header needs %llu bytes, file has %zu", p,
                static_cast<unsigned long long>(header_len), size - 8);
  }
  if (header_len < 2 || data[8] != '{') {
    return fail(Error::BadMagic, "%s: not a safetensors file (header does not start with a JSON object)", p);
  }
  const uint8_t* body = data + 8 + header_len;
  const uint64_t body_size = size - 8 - header_len;
  nlohmann::json header = nlohmann::json::parse(data + 8, data + 8 + header_len, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return fail(Error::CorruptFile, "%s: safetensors header is not valid JSON", p);
  }
  SafetensorsFile f;
  f.path_ = path;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const nlohmann::json& v = it.value();
    const char* name = it.key().c_str();
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets") ||
        !v["dtype"].is_string() || !v["shape"].is_array() || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2) {
      return fail(Error::CorruptFile, "%s: tensor '%s' header entry lacks dtype/shape/data_offsets", p, name);
    }
    StTensor t;
    t.name = it.key();
    const std::string dtype = v["dtype"].get<std::string>();
    if (!parse_dtype(dtype, &t.dtype)) {
      return fail(Error::UnsupportedType, "%s: tensor '%s' has unsupported dtype %s", p, name, dtype.c_str());
    }
    uint64_t elements = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned())
        return fail(Error::CorruptFile, "%s: tensor '%s' has a non-integer dimension", p, name);
      const uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && elements > (1ull << 48) / dim) {
        return fail(Error::CorruptFile, "%s: tensor '%s' shape is implausibly large", p, name);
      }
      elements *= dim;
      t.shape.push_back(dim);
    }
    const auto& offs = v["data_offsets"];
    if (!offs[0].is_number_unsigned() || !offs[1].is_number_unsigned()) {
      return fail(Error::CorruptFile, "%s: tensor '%s' data_offsets are not integers", p, name);
    }
    const uint64_t begin = offs[0].get<uint64_t>(), end = offs[1].get<uint64_t>();
    if (begin > end)
      return fail(Error::CorruptFile, "%s: tensor '%s' data_offsets [%llu, %llu) are reversed", p, name,
                  static_cast<unsigned long long>(begin), static_cast<unsigned long long>(end));
    if (end > body_size) {
      return fail(Error::Truncated, "%s: tensor '%s' data [%llu, %llu) runs past the end of the data (%llu bytes)", p,
                  name, static_cast<unsigned long long>(begin), static_cast<unsigned long long>(end),
                  static_cast<unsigned long long>(body_size));
    }
    if (end - begin != elements * dtype_size(t.dtype)) {
      return fail(Error::CorruptFile, "%s: tensor '%s' has %llu bytes, its shape and dtype %s need %llu", p, name,
                  static_cast<unsigned long long>(end - begin), dtype.c_str(),
                  static_cast<unsigned long long>(elements * dtype_size(t.dtype)));
    }
    t.data = body + begin;
    t.size = end - begin;
    f.tensors_.emplace(t.name, std::move(t));
  }
  return f;
}

const StTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Result<std::vector<float>> SafetensorsFile::read_float(const StTensor& t) const {
  const uint64_t n = t.elements();
  std::vector<float> out(n);
  switch (t.dtype) {
    case StDtype::F32: std::memcpy(out.data(), t.data, n * 4); return out;
    case StDtype::F16:
    case StDtype::BF16:
      for (uint64_t i = 0; i < n; ++i) {
        const uint16_t h = static_cast<uint16_t>(t.data[2 * i] | (t.data[2 * i + 1] << 8));
        out[i] = t.dtype == StDtype::F16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      return out;
    default:
      return fail(Error::UnsupportedType, "%s: tensor '%s' is %s, expected a float dtype", path_.c_str(),
                  t.name.c_str(), to_string(t.dtype));
  }
}

}  // namespace tern::convert
