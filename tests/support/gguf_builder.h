// Writes GGUF files byte by byte for tests, straight from the format definition
// (little-endian; header, key/values, tensor infos, padding to the alignment, data).
// Deliberately independent of converter/gguf.*: it shares no code with the reader.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tern::testing::gguf_fixture {

// GGUF value type ids.
enum : uint32_t { kU8 = 0, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64 };
// GGML tensor type ids used by the fixtures.
enum : uint32_t {
  kTypeF32 = 0,
  kTypeF16 = 1,
  kTypeQ8_0 = 8,
  kTypeQ6_K = 14,
  kTypeBF16 = 30,
  kTypeTQ1_0 = 34,
  kTypeTQ2_0 = 35,
  kTypeI2_S = 36
};

class Bytes {
 public:
  std::vector<uint8_t> data;
  template <typename T>
  Bytes& put(T v) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    data.insert(data.end(), raw, raw + sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    data.insert(data.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& raw(const std::vector<uint8_t>& b) {
    data.insert(data.end(), b.begin(), b.end());
    return *this;
  }
};

struct Tensor {
  std::string name;
  std::vector<uint64_t> dims;  // innermost first, as GGUF stores them
  uint32_t type;
  std::vector<uint8_t> payload;
};

// Accumulates key/values and tensors; build() lays them out.
class Builder {
 public:
  uint32_t version = 3;
  uint64_t alignment = 32;  // used for layout; add general.alignment yourself to change it in the file

  Builder& kv_u32(const std::string& k, uint32_t v) { return kv(k, kU32, Bytes().put(v)); }
  Builder& kv_i32(const std::string& k, int32_t v) { return kv(k, kI32, Bytes().put(v)); }
  Builder& kv_f32(const std::string& k, float v) { return kv(k, kF32, Bytes().put(v)); }
  Builder& kv_bool(const std::string& k, bool v) { return kv(k, kBool, Bytes().put<uint8_t>(v ? 1 : 0)); }
  Builder& kv_str(const std::string& k, const std::string& v) { return kv(k, kString, Bytes().str(v)); }
  Builder& kv_strs(const std::string& k, const std::vector<std::string>& v) {
    Bytes b;
    b.put<uint32_t>(kString).put<uint64_t>(v.size());
    for (const auto& s : v) b.str(s);
    return kv(k, kArray, b);
  }
  Builder& kv_i32s(const std::string& k, const std::vector<int32_t>& v) {
    Bytes b;
    b.put<uint32_t>(kI32).put<uint64_t>(v.size());
    for (int32_t x : v) b.put(x);
    return kv(k, kArray, b);
  }
  Builder& kv_f32s(const std::string& k, const std::vector<float>& v) {
    Bytes b;
    b.put<uint32_t>(kF32).put<uint64_t>(v.size());
    for (float x : v) b.put(x);
    return kv(k, kArray, b);
  }
  // Any value given as its type id and encoded bytes.
  Builder& kv(const std::string& k, uint32_t type, const Bytes& value) {
    Bytes b;
    b.str(k).put(type).raw(value.data);
    kvs_.push_back(b.data);
    return *this;
  }
  Builder& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, std::vector<uint8_t> payload) {
    tensors_.push_back({name, std::move(dims), type, std::move(payload)});
    return *this;
  }

  // Offsets of each tensor relative to the data section (filled by build()).
  std::vector<uint64_t> offsets;
  uint64_t data_offset = 0;

  std::vector<uint8_t> build() {
    Bytes out;
    out.put<uint32_t>(0x46554747u).put<uint32_t>(version).put<uint64_t>(tensors_.size()).put<uint64_t>(kvs_.size());
    for (const auto& kv : kvs_) out.raw(kv);
    offsets.clear();
    uint64_t offset = 0;
    for (const auto& t : tensors_) {
      out.str(t.name).put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
      for (uint64_t d : t.dims) out.put(d);
      out.put(t.type).put(offset);
      offsets.push_back(offset);
      offset += pad(t.payload.size());
    }
    out.data.resize(pad(out.data.size()), 0);
    data_offset = out.data.size();
    for (const auto& t : tensors_) {
      out.raw(t.payload);
      out.data.resize(pad(out.data.size()), 0);
    }
    return out.data;
  }

 private:
  uint64_t pad(uint64_t n) const { return (n + alignment - 1) / alignment * alignment; }
  std::vector<std::vector<uint8_t>> kvs_;
  std::vector<Tensor> tensors_;
};

// ---- payload encoders, from the format definitions ----

inline uint16_t f16_bits(float f) {
  // Exact for the values the tests use (normal f16 numbers); round-to-nearest-even otherwise.
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (exp <= 0) return static_cast<uint16_t>(sign);
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  uint32_t h = sign | static_cast<uint32_t>(exp) << 10 | mant >> 13;
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) ++h;
  return static_cast<uint16_t>(h);
}

inline std::vector<uint8_t> f32_payload(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}
inline std::vector<uint8_t> f16_payload(const std::vector<float>& v) {
  Bytes b;
  for (float x : v) b.put(f16_bits(x));
  return b.data;
}

// tq2_0: per 256 weights, 64 bytes then f16 d. Weight 128*c + 32*l + m -> byte 32*c + m, bits 2l.
inline std::vector<uint8_t> tq2_0_payload(const std::vector<int8_t>& codes, float d) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < codes.size() / 256; ++b) {
    uint8_t qs[64] = {};
    for (int i = 0; i < 256; ++i) {
      const int c = i / 128, l = (i % 128) / 32, m = i % 32;
      qs[32 * c + m] |= static_cast<uint8_t>((codes[256 * b + i] + 1) << (2 * l));
    }
    out.insert(out.end(), qs, qs + 64);
    const uint16_t h = f16_bits(d);
    out.push_back(h & 0xff);
    out.push_back(h >> 8);
  }
  return out;
}

// i2_s (bitnet.cpp, x86): per 128 weights, 32 bytes; weight j -> byte j % 32, bits 6 - 2*(j/32);
// then the float scale and padding to 32 bytes.
inline std::vector<uint8_t> i2_s_payload(const std::vector<int8_t>& codes, float scale) {
  std::vector<uint8_t> out(codes.size() / 4 + 32, 0);
  for (size_t b = 0; b < codes.size() / 128; ++b) {
    for (int j = 0; j < 128; ++j) {
      out[32 * b + j % 32] |= static_cast<uint8_t>((codes[128 * b + j] + 1) << (6 - 2 * (j / 32)));
    }
  }
  std::memcpy(&out[codes.size() / 4], &scale, 4);
  return out;
}

// tq1_0: per 256 weights, 48 bytes of 5 trits + 4 bytes of 4 trits + f16 d. A byte stores
// ceil(v * 256 / 243) where v is the trits read as a base-3 number, first trit most significant
// (4-trit bytes get a trailing 0 trit). Weight order: qs[0..32) digit-major (160 weights),
// qs[32..48) digit-major (80), qh digit-major (16).
inline uint8_t pack_trits(const int* trits, int n) {
  int v = 0;
  for (int i = 0; i < 5; ++i) v = v * 3 + (i < n ? trits[i] : 0);
  return static_cast<uint8_t>((v * 256 + 242) / 243);
}
inline std::vector<uint8_t> tq1_0_payload(const std::vector<int8_t>& codes, float d) {
  std::vector<uint8_t> out;
  for (size_t b = 0; b < codes.size() / 256; ++b) {
    const int8_t* c = &codes[256 * b];
    uint8_t block[54] = {};
    int trits[5];
    for (int m = 0; m < 32; ++m) {
      for (int n = 0; n < 5; ++n) trits[n] = c[n * 32 + m] + 1;
      block[m] = pack_trits(trits, 5);
    }
    for (int m = 0; m < 16; ++m) {
      for (int n = 0; n < 5; ++n) trits[n] = c[160 + n * 16 + m] + 1;
      block[32 + m] = pack_trits(trits, 5);
    }
    for (int m = 0; m < 4; ++m) {
      for (int n = 0; n < 4; ++n) trits[n] = c[240 + n * 4 + m] + 1;
      block[48 + m] = pack_trits(trits, 4);
    }
    const uint16_t h = f16_bits(d);
    block[52] = h & 0xff;
    block[53] = h >> 8;
    out.insert(out.end(), block, block + 54);
  }
  return out;
}

}  // namespace tern::testing::gguf_fixture
