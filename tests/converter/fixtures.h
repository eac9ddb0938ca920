// Fixture builders for the converter tests: temp directories, safetensors files written
// byte by byte, and a small hand-made model.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "converter/ir/model_ir.h"

namespace tern::testing {

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  if (!bytes.empty()) {
    EXPECT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  }
  std::fclose(f);
}

inline void write_text(const std::string& path, const std::string& text) {
  write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

// bfloat16 of a float that is exactly representable (the fixtures only use such values).
inline uint16_t exact_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  EXPECT_EQ(bits & 0xffffu, 0u) << f << " is not exactly representable in bf16";
  return static_cast<uint16_t>(bits >> 16);
}
inline float from_bf16(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

struct StEntry {
  std::string name;
  std::string dtype;  // "U8", "BF16", "F32", ... (written verbatim)
  std::vector<uint64_t> shape;
  std::vector<uint8_t> bytes;
};

inline void append_le(std::vector<uint8_t>& out, const void* p, size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);  // the tests run on little-endian hosts only
}

inline StEntry st_f32(const std::string& name, std::vector<uint64_t> shape, const std::vector<float>& v) {
  StEntry e{name, "F32", std::move(shape), {}};
  append_le(e.bytes, v.data(), v.size() * 4);
  return e;
}
inline StEntry st_bf16(const std::string& name, std::vector<uint64_t> shape, const std::vector<float>& v) {
  StEntry e{name, "BF16", std::move(shape), {}};
  for (float f : v) {
    const uint16_t h = exact_bf16(f);
    append_le(e.bytes, &h, 2);
  }
  return e;
}

// The header JSON is assembled by hand, not by the JSON library the reader uses.
inline std::vector<uint8_t> safetensors_bytes(const std::vector<StEntry>& entries) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  uint64_t offset = 0;
  for (const auto& e : entries) {
    header += ",\"" + e.name + "\":{\"dtype\":\"" + e.dtype + "\",\"shape\":[";
    for (size_t i = 0; i < e.shape.size(); ++i) header += (i ? "," : "") + std::to_string(e.shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + e.bytes.size()) + "]}";
    offset += e.bytes.size();
  }
  header += "}";
  while (header.size() % 8) header += ' ';
  std::vector<uint8_t> out;
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  for (const auto& e : entries) out.insert(out.end(), e.bytes.begin(), e.bytes.end());
  return out;
}

// A deterministic ternary code for (tensor id, row, col), independent of any packer.
inline int8_t fixture_code(int tensor, uint64_t r, uint64_t c) {
  return static_cast<int8_t>(static_cast<int>((r * 7 + c * 3 + static_cast<uint64_t>(tensor) * 5) % 3) - 1);
}

// A complete tiny 2B-4T-shaped model: hidden 8, ffn 12, 1 layer, 2 heads / 1 KV head of
// dim 4, vocab 6. Ternary tensors use fixture_code; floats are simple exact values.
inline convert::ModelIR tiny_model_ir(uint32_t layers = 1) {
  convert::ModelIR ir;
  ModelConfig& c = ir.config;
  c.family = ModelFamily::Bitnet2B4T;
  c.hidden = 8, c.ffn_hidden = 12, c.layers = layers, c.heads = 2, c.kv_heads = 1, c.head_dim = 4, c.vocab = 6;
  c.max_context = 32, c.has_sub_norms = true, c.tied_embeddings = true, c.bos_id = 3, c.eos_id = 4;
  int id = 0;
  auto add_float = [&](const std::string& name, std::vector<uint64_t> shape) {
    convert::TensorIR t;
    t.name = name;
    t.shape = std::move(shape);
    t.kind = convert::TensorKind::Float;
    for (uint64_t i = 0; i < t.elements(); ++i) t.values.push_back(0.25f * static_cast<float>((i * 3 + id) % 9) - 1.0f);
    ++id;
    ir.tensors.push_back(std::move(t));
  };
  auto add_ternary = [&](const std::string& name, uint64_t out, uint64_t in) {
    convert::TensorIR t;
    t.name = name;
    t.shape = {out, in};
    t.kind = convert::TensorKind::Ternary;
    t.scale = 0.125f * static_cast<float>(id + 1);
    for (uint64_t r = 0; r < out; ++r) {
      for (uint64_t col = 0; col < in; ++col) t.codes.push_back(fixture_code(id, r, col));
    }
    ++id;
    ir.tensors.push_back(std::move(t));
  };
  add_float("tok_embeddings", {6, 8});
  for (uint32_t l = 0; l < layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    add_float(p + "attn_norm", {8});
    add_ternary(p + "wq", 8, 8);
    add_ternary(p + "wk", 4, 8);
    add_ternary(p + "wv", 4, 8);
    add_float(p + "attn_sub_norm", {8});
    add_ternary(p + "wo", 8, 8);
    add_float(p + "ffn_norm", {8});
    add_ternary(p + "w_gate", 12, 8);
    add_ternary(p + "w_up", 12, 8);
    add_float(p + "ffn_sub_norm", {12});
    add_ternary(p + "w_down", 8, 12);
  }
  add_float("norm", {8});
  ir.tokenizer.type = convert::TokenizerType::ByteLevelBpe;
  ir.tokenizer.pieces = {"a", "b", "ab", "<s>", "</s>", "c"};
  ir.tokenizer.attrs.assign(6, convert::TokenAttr::Normal);
  ir.tokenizer.merges = {{0, 1}};
  ir.tokenizer.bos_id = 3;
  ir.tokenizer.eos_id = 4;
  ir.source_format = "fixture";
  ir.source_path = "fixture";
  return ir;
}

}  // namespace tern::testing
