#include "converter/import/gguf_import.h"

#include <array>
#include <cmath>
#include <cstring>
#include <map>

#include "converter/tokenizer/tokenizer_import.h"
#include "kernels/half.h"
#include "runtime/model/model_family.h"
#include "runtime/model/tensor_names.h"

namespace tern::convert {

namespace {

using gguf::TensorInfo;
using gguf::TensorType;

uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
float load_f32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

// Relative tolerance for "the same f16 number": one f16 ulp is 2^-10 of the value.
constexpr float kF16RelTol = 1.0f / 1024.0f;
bool same_scale(float a, float b) { return std::fabs(a - b) <= kF16RelTol * std::max(std::fabs(a), std::fabs(b)); }

const char* type_name(const TensorInfo& t) {
  const gguf::TypeTraits* tr = gguf::type_traits(t.type_id);
  return tr != nullptr ? tr->name : "?";
}

// q6_K: 256 weights as 4+2-bit quants in 16 groups with int8 group scales and one f16 d.
// Layout: ql[128], qh[64], scales[16], d.
void dequantize_q6_k_block(const uint8_t* block, float* y) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(block + 192);
  const float d = f16_to_f32(load_u16(block + 208));
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
      const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
      const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
      y[l] = d * sc[is] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

// tq2_0: 256 weights, 2 bits each (0,1,2 -> -1,0,+1), then an f16 d. Within each 32-byte
// chunk, weight 32*l + m sits in byte m at bits 2l.
Error decode_tq2_0_block(const uint8_t* block, int8_t* codes) {
  for (int chunk = 0; chunk < 2; ++chunk) {
    for (int l = 0; l < 4; ++l) {
      for (int m = 0; m < 32; ++m) {
        const int q = (block[chunk * 32 + m] >> (2 * l)) & 3;
        if (q == 3) return Error::CorruptFile;
        codes[chunk * 128 + l * 32 + m] = static_cast<int8_t>(q - 1);
      }
    }
  }
  return Error::Ok;
}

// tq1_0: 256 weights as base-3 digits: qs[48] hold 5 trits per byte (first 32 bytes give
// weights 0..159 digit-major, next 16 give 160..239), qh[4] hold 4 trits each (240..255);
// then an f16 d. A byte stores ceil(v * 256 / 243) for the trit number v, so digit n is
// the top "trit" of (byte * 3^n mod 256), extracted as (x * 3) >> 8.
void decode_tq1_0_block(const uint8_t* block, int8_t* codes) {
  static const uint8_t kPow3[6] = {1, 3, 9, 27, 81, 243};
  const uint8_t* qs = block;
  const uint8_t* qh = block + 48;
  int out = 0;
  for (int n = 0; n < 5; ++n) {
    for (int m = 0; m < 32; ++m) {
      const uint8_t q = static_cast<uint8_t>(qs[m] * kPow3[n]);
      codes[out++] = static_cast<int8_t>(((q * 3) >> 8) - 1);
    }
  }
  for (int n = 0; n < 5; ++n) {
    for (int m = 0; m < 16; ++m) {
      const uint8_t q = static_cast<uint8_t>(qs[32 + m] * kPow3[n]);
      codes[out++] = static_cast<int8_t>(((q * 3) >> 8) - 1);
    }
  }
  for (int n = 0; n < 4; ++n) {
    for (int m = 0; m < 4; ++m) {
      const uint8_t q = static_cast<uint8_t>(qh[m] * kPow3[n]);
      codes[out++] = static_cast<int8_t>(((q * 3) >> 8) - 1);
    }
  }
}

// Per-block f16 scales of tq1_0/tq2_0 must agree: Tern keeps one scale per tensor.
Error merge_block_scale(const gguf::File& file, const TensorInfo& t, uint64_t block, float d, bool block_nonzero,
                        float* scale, bool* have_scale) {
  if (!std::isfinite(d)) {
    return fail(Error::CorruptFile, "%s: tensor '%s' (%s) block %llu has a non-finite scale", file.name().c_str(),
                t.name.c_str(), type_name(t), static_cast<unsigned long long>(block));
  }
  if (!block_nonzero || d == 0.0f) return Error::Ok;  // an all-zero block carries no scale
  if (!*have_scale) {
    *scale = std::fabs(d);
    *have_scale = true;
    return Error::Ok;
  }
  if (!same_scale(std::fabs(d), *scale)) {
    return fail(Error::UnsupportedType,
                "%s: tensor '%s' (%s) has per-block scales that differ (block %llu: %g, earlier blocks: %g); "
                "Tern needs one scale per tensor",
                file.name().c_str(), t.name.c_str(), type_name(t), static_cast<unsigned long long>(block),
                static_cast<double>(d), static_cast<double>(*scale));
  }
  return Error::Ok;
}

bool any_nonzero(const int8_t* codes, int n) {
  for (int i = 0; i < n; ++i) {
    if (codes[i] != 0) return true;
  }
  return false;
}

}  // namespace

Result<std::vector<float>> gguf_decode_float(const gguf::File& file, const TensorInfo& t) {
  std::vector<float> out;
  const uint8_t* p = t.data;
  switch (t.type()) {
    case TensorType::F32:
      out.resize(t.elements);
      for (uint64_t i = 0; i < t.elements; ++i) out[i] = load_f32(p + 4 * i);
      return out;
    case TensorType::F16:
      out.resize(t.elements);
      for (uint64_t i = 0; i < t.elements; ++i) out[i] = f16_to_f32(load_u16(p + 2 * i));
      return out;
    case TensorType::BF16:
      out.resize(t.elements);
      for (uint64_t i = 0; i < t.elements; ++i) out[i] = bf16_to_f32(load_u16(p + 2 * i));
      return out;
    case TensorType::Q8_0:  // d (f16) then 32 int8
      out.resize(t.elements);
      for (uint64_t b = 0; b < t.elements / 32; ++b) {
        const uint8_t* block = p + 34 * b;
        const float d = f16_to_f32(load_u16(block));
        for (int j = 0; j < 32; ++j) out[32 * b + j] = d * static_cast<int8_t>(block[2 + j]);
      }
      return out;
    case TensorType::Q6_K:
      out.resize(t.elements);
      for (uint64_t b = 0; b < t.elements / 256; ++b) dequantize_q6_k_block(p + 210 * b, &out[256 * b]);
      return out;
    default:
      return fail(Error::UnsupportedType, "%s: tensor '%s' has type %s, which the importer cannot decode to floats",
                  file.name().c_str(), t.name.c_str(), type_name(t));
  }
}

Result<TernaryTensor> gguf_decode_ternary(const gguf::File& file, const TensorInfo& t) {
  TernaryTensor out;
  out.codes.resize(t.elements);
  int8_t* codes = out.codes.data();
  const uint8_t* p = t.data;
  const char* fname = file.name().c_str();
  switch (t.type()) {
    case TensorType::TQ2_0:
    case TensorType::TQ1_0: {
      const bool tq2 = t.type() == TensorType::TQ2_0;
      const uint64_t block_bytes = tq2 ? 66 : 54;
      bool have_scale = false;
      for (uint64_t b = 0; b < t.elements / 256; ++b) {
        const uint8_t* block = p + block_bytes * b;
        int8_t* block_codes = codes + 256 * b;
        if (tq2) {
          if (decode_tq2_0_block(block, block_codes) != Error::Ok) {
            return fail(Error::CorruptFile,
                        "%s: tensor '%s' (tq2_0) block %llu holds the 2-bit code 3, not a ternary value", fname,
                        t.name.c_str(), static_cast<unsigned long long>(b));
          }
        } else {
          decode_tq1_0_block(block, block_codes);
        }
        const float d = f16_to_f32(load_u16(block + block_bytes - 2));
        TERN_RETURN_IF_ERROR(merge_block_scale(file, t, b, d, any_nonzero(block_codes, 256), &out.scale, &have_scale));
      }
      return out;
    }
    case TensorType::I2_S: {
      // bitnet.cpp x86 layout: blocks of 128 weights in 32 bytes; weight j of a block is in
      // byte j % 32 at bits 6 - 2 * (j / 32). Codes 0,1,2 -> -1,0,+1. The tensor's one float
      // scale follows the n/4 code bytes.
      if (t.elements % 128 != 0) {
        return fail(Error::ShapeMismatch, "%s: tensor '%s' (i2_s) has %llu weights, not a multiple of 128", fname,
                    t.name.c_str(), static_cast<unsigned long long>(t.elements));
      }
      for (uint64_t b = 0; b < t.elements / 128; ++b) {
        const uint8_t* block = p + 32 * b;
        for (int j = 0; j < 128; ++j) {
          const int q = (block[j % 32] >> (6 - 2 * (j / 32))) & 3;
          if (q == 3) {
            return fail(Error::CorruptFile,
                        "%s: tensor '%s' (i2_s) weight %llu holds the 2-bit code 3, not a ternary value", fname,
                        t.name.c_str(), static_cast<unsigned long long>(128 * b + j));
          }
          codes[128 * b + j] = static_cast<int8_t>(q - 1);
        }
      }
      out.scale = load_f32(p + t.elements / 4);
      if (!std::isfinite(out.scale) || out.scale < 0.0f) {
        return fail(Error::CorruptFile, "%s: tensor '%s' (i2_s) has an invalid scale %g", fname, t.name.c_str(),
                    static_cast<double>(out.scale));
      }
      return out;
    }
    case TensorType::F32:
    case TensorType::F16:
    case TensorType::BF16: {
      // Float storage of an already ternarized weight: every value is 0 or +-s.
      TERN_ASSIGN_OR_RETURN(std::vector<float> values, gguf_decode_float(file, t));
      float s = 0.0f;
      for (float v : values) {
        if (!std::isfinite(v)) {
          return fail(Error::CorruptFile, "%s: tensor '%s' (%s) holds a non-finite value", fname, t.name.c_str(),
                      type_name(t));
        }
        s = std::max(s, std::fabs(v));
      }
      for (uint64_t i = 0; i < values.size(); ++i) {
        const float a = std::fabs(values[i]);
        if (a == 0.0f) {
          codes[i] = 0;
        } else if (same_scale(a, s)) {
          codes[i] = values[i] > 0 ? 1 : -1;
        } else {
          return fail(Error::UnsupportedType,
                      "%s: tensor '%s' (%s) is not ternary: element %llu is %g but the other nonzero weights are +-%g",
                      fname, t.name.c_str(), type_name(t), static_cast<unsigned long long>(i),
                      static_cast<double>(values[i]), static_cast<double>(s));
        }
      }
      out.scale = s;
      return out;
    }
    default:
      return fail(Error::UnsupportedType, "%s: tensor '%s' has type %s, which is not a ternary encoding Tern imports",
                  fname, t.name.c_str(), type_name(t));
  }
}

// ---- tokenizer ----

namespace {

// GPT-2 spells each byte as one printable character: bytes '!'..'~', 0xA1..0xAC and
// 0xAE..0xFF as themselves, the other 68 as U+0100.. in byte order.
const std::array<int, 324>& gpt2_codepoint_to_byte() {
  static const std::array<int, 324> table = [] {
    std::array<int, 324> t{};
    t.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
      if (printable) {
        t[b] = b;
      } else {
        t[next++] = b;
      }
    }
    return t;
  }();
  return table;
}

// Decodes one UTF-8 code point at s[*i]; false on malformed input.
bool next_codepoint(const std::string& s, size_t* i, uint32_t* cp) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  const unsigned char c = p[*i];
  int len;
  uint32_t v;
  if (c < 0x80) {
    len = 1;
    v = c;
  } else if ((c & 0xe0) == 0xc0) {
    len = 2;
    v = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    len = 3;
    v = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    len = 4;
    v = c & 0x07;
  } else {
    return false;
  }
  if (*i + len > n) return false;
  for (int k = 1; k < len; ++k) {
    if ((p[*i + k] & 0xc0) != 0x80) return false;
    v = v << 6 | (p[*i + k] & 0x3f);
  }
  *i += len;
  *cp = v;
  return true;
}

TokenAttr attr_from_gguf(int64_t token_type) {
  // llama.cpp's LLAMA_TOKEN_TYPE_*: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
  switch (token_type) {
    case 2: return TokenAttr::Unknown;
    case 3: return TokenAttr::Control;
    case 4: return TokenAttr::UserDefined;
    case 5: return TokenAttr::Unused;
    case 6: return TokenAttr::Byte;
    default: return TokenAttr::Normal;
  }
}

Result<int32_t> optional_token_id(const gguf::File& file, const char* key, size_t vocab) {
  if (file.find(key) == nullptr) return int32_t{-1};
  TERN_ASSIGN_OR_RETURN(uint64_t id, file.get_uint(key));
  if (id >= vocab) {
    return fail(Error::OutOfRange, "%s: %s = %llu is outside the %zu-token vocabulary", file.name().c_str(), key,
                static_cast<unsigned long long>(id), vocab);
  }
  return static_cast<int32_t>(id);
}

}  // namespace

bool gpt2_unicode_to_bytes(const std::string& text, std::string* bytes) {
  const auto& table = gpt2_codepoint_to_byte();
  bytes->clear();
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp = 0;
    if (!next_codepoint(text, &i, &cp)) return false;
    if (cp >= table.size() || table[cp] < 0) return false;
    bytes->push_back(static_cast<char>(table[cp]));
  }
  return true;
}

Result<TokenizerIR> gguf_import_tokenizer(const gguf::File& file) {
  const char* fname = file.name().c_str();
  TokenizerIR tok;
  TERN_ASSIGN_OR_RETURN(std::string model, file.get_string("tokenizer.ggml.model"));
  TERN_ASSIGN_OR_RETURN(std::vector<std::string> tokens, file.get_string_array("tokenizer.ggml.tokens"));
  if (tokens.empty()) return fail(Error::CorruptFile, "%s: tokenizer.ggml.tokens is empty", fname);
  const size_t vocab = tokens.size();

  std::vector<double> types;
  if (file.find("tokenizer.ggml.token_type") != nullptr) {
    TERN_ASSIGN_OR_RETURN(types, file.get_number_array("tokenizer.ggml.token_type"));
    if (types.size() != vocab) {
      return fail(Error::ShapeMismatch, "%s: tokenizer.ggml.token_type has %zu entries for %zu tokens", fname,
                  types.size(), vocab);
    }
  }
  tok.attrs.resize(vocab, TokenAttr::Normal);
  for (size_t i = 0; i < types.size(); ++i) tok.attrs[i] = attr_from_gguf(static_cast<int64_t>(types[i]));

  if (model == "gpt2") {
    tok.type = TokenizerType::ByteLevelBpe;
    std::string pre = "default";
    if (file.find("tokenizer.ggml.pre") != nullptr) {
      TERN_ASSIGN_OR_RETURN(pre, file.get_string("tokenizer.ggml.pre"));
    }
    // Tern's runtime implements the LLaMA-3 and Qwen2 pre-tokenizers; another split would
    // tokenize differently without any error, so refuse it here.
    if (pre == "qwen2") {
      tok.pretokenizer = PreTokenizer::Qwen2;
      tok.nfc = true;  // Qwen's tokenizer.json normalizes to NFC first
    } else if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
      tok.pretokenizer = PreTokenizer::Llama3;
      tok.ignore_merges = true;  // as llama.cpp and HF tokenizers do for LLaMA-3
    } else {
      return fail(Error::NotSupported,
                  "%s: byte-level BPE pre-tokenizer '%s' is not supported (llama-bpe / llama3 or qwen2)", fname,
                  pre.c_str());
    }
    tok.pieces.resize(vocab);
    std::map<std::string, uint32_t> id_of;  // GGUF (GPT-2 spelled) text -> id, for merges
    for (size_t i = 0; i < vocab; ++i) {
      id_of.emplace(tokens[i], static_cast<uint32_t>(i));
      // Control and user-defined tokens are stored as their literal text.
      if (tok.attrs[i] == TokenAttr::Control || tok.attrs[i] == TokenAttr::UserDefined) {
        tok.pieces[i] = tokens[i];
      } else if (!gpt2_unicode_to_bytes(tokens[i], &tok.pieces[i])) {
        return fail(Error::CorruptFile, "%s: token %zu is not spelled in GPT-2 byte-level characters", fname, i);
      }
    }
    if (file.find("tokenizer.ggml.merges") != nullptr) {
      TERN_ASSIGN_OR_RETURN(std::vector<std::string> merges, file.get_string_array("tokenizer.ggml.merges"));
      tok.merges.reserve(merges.size());
      for (size_t m = 0; m < merges.size(); ++m) {
        const std::string& merge = merges[m];
        const size_t space = merge.find(' ', 1);
        auto left = space == std::string::npos ? id_of.end() : id_of.find(merge.substr(0, space));
        auto right = space == std::string::npos ? id_of.end() : id_of.find(merge.substr(space + 1));
        if (left == id_of.end() || right == id_of.end()) {
          return fail(Error::CorruptFile, "%s: merge %zu ('%s') does not name two tokens of the vocabulary", fname, m,
                      merge.c_str());
        }
        tok.merges.emplace_back(left->second, right->second);
      }
    }
  } else if (model == "llama") {
    tok.type = TokenizerType::SentencePieceBpe;
    tok.pieces = tokens;
    tok.byte_fallback = true;
    tok.add_dummy_prefix = true;
    if (file.find("tokenizer.ggml.add_space_prefix") != nullptr) {
      TERN_ASSIGN_OR_RETURN(tok.add_dummy_prefix, file.get_bool("tokenizer.ggml.add_space_prefix"));
    }
    if (file.find("tokenizer.ggml.scores") != nullptr) {
      TERN_ASSIGN_OR_RETURN(std::vector<double> scores, file.get_number_array("tokenizer.ggml.scores"));
      if (scores.size() != vocab) {
        return fail(Error::ShapeMismatch, "%s: tokenizer.ggml.scores has %zu entries for %zu tokens", fname,
                    scores.size(), vocab);
      }
      tok.scores.assign(scores.begin(), scores.end());
    } else {
      tok.scores.assign(vocab, 0.0f);
    }
  } else {
    return fail(Error::NotSupported, "%s: tokenizer model '%s' is not supported (gpt2 or llama)", fname, model.c_str());
  }

  TERN_ASSIGN_OR_RETURN(tok.bos_id, optional_token_id(file, "tokenizer.ggml.bos_token_id", vocab));
  TERN_ASSIGN_OR_RETURN(tok.eos_id, optional_token_id(file, "tokenizer.ggml.eos_token_id", vocab));
  TERN_ASSIGN_OR_RETURN(tok.eot_id, optional_token_id(file, "tokenizer.ggml.eot_token_id", vocab));
  TERN_ASSIGN_OR_RETURN(tok.unk_id, optional_token_id(file, "tokenizer.ggml.unknown_token_id", vocab));
  TERN_ASSIGN_OR_RETURN(tok.pad_id, optional_token_id(file, "tokenizer.ggml.padding_token_id", vocab));
  if (file.find("tokenizer.ggml.add_bos_token") != nullptr) {
    TERN_ASSIGN_OR_RETURN(tok.add_bos, file.get_bool("tokenizer.ggml.add_bos_token"));
  }
  if (file.find("tokenizer.ggml.add_eos_token") != nullptr) {
    TERN_ASSIGN_OR_RETURN(tok.add_eos, file.get_bool("tokenizer.ggml.add_eos_token"));
  }
  if (file.find("tokenizer.chat_template") != nullptr) {
    TERN_ASSIGN_OR_RETURN(tok.chat_template, file.get_string("tokenizer.chat_template"));
  }
  return tok;
}

// ---- model ----

namespace {

// "token_embd.weight", "output_norm.weight", "output.weight" or "blk.<N>.<kind>.weight"
// with N < layers and a kind from the family table (runtime/model/model_family.h).
bool is_known_tensor(const std::string& name, uint32_t layers, ModelFamily family) {
  if (name == "token_embd.weight" || name == "output_norm.weight" || name == "output.weight") return true;
  const std::string prefix = "blk.", suffix = ".weight";
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  size_t i = prefix.size();
  uint64_t layer = 0;
  const size_t digits_start = i;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && i - digits_start < 10) {
    layer = layer * 10 + static_cast<uint64_t>(name[i] - '0');
    ++i;
  }
  if (i == digits_start || i >= name.size() || name[i] != '.' || layer >= layers) return false;
  if (i - digits_start > 1 && name[digits_start] == '0') return false;  // no leading zeros
  const std::string kind = name.substr(i + 1, name.size() - suffix.size() - i - 1);
  for (size_t k = 0; k < kLayerTensorCount; ++k) {
    if (kind == gguf_tensor_name(kLayerTensors[k], family)) return true;
  }
  return false;
}

Result<uint32_t> get_u32(const gguf::File& file, const std::string& key) {
  TERN_ASSIGN_OR_RETURN(uint64_t v, file.get_uint(key));
  if (v == 0 || v > (uint64_t{1} << 30)) {
    return fail(Error::OutOfRange, "%s: %s = %llu is out of range", file.name().c_str(), key.c_str(),
                static_cast<unsigned long long>(v));
  }
  return static_cast<uint32_t>(v);
}

// bitnet.cpp's embedding GGUFs (arch qwen3 / gemma3, guide: docs/bitnet-embeddings-i2s-guide.md):
// pooling, the end token, and Gemma3's sliding windows, RoPE bases and scales. Keys llama.cpp
// does not read have llama.cpp's defaults for gemma3 (every 6th layer full, local RoPE base
// 10000, scale 1 / sqrt(head_dim)).
Error read_embedding_gguf(const gguf::File& file, const std::string& p, ModelConfig* c) {
  const char* fname = file.name().c_str();
  const bool gemma = c->family == ModelFamily::Gemma3Bitnet;
  c->embedding = true;
  c->embedding_normalize = true;
  c->has_sub_norms = true;
  c->activation = gemma ? Activation::GeluTanh : Activation::Silu;
  c->pooling = Pooling::Last;
  if (file.find(p + "pooling_type") != nullptr) {
    TERN_ASSIGN_OR_RETURN(uint64_t type, file.get_uint(p + "pooling_type"));
    // llama.cpp's enum: 1 mean, 2 cls, 3 last.
    if (type == 1) {
      c->pooling = Pooling::Mean;
    } else if (type == 2) {
      c->pooling = Pooling::First;
    } else if (type != 3) {
      return fail(Error::NotSupported, "%s: %spooling_type %llu is not supported (1 mean, 2 cls, 3 last)", fname,
                  p.c_str(), static_cast<unsigned long long>(type));
    }
  }
  if (!gemma) return Error::Ok;
  c->embedding_scale = std::sqrt(static_cast<float>(c->hidden));
  float scalar = static_cast<float>(c->head_dim);
  if (file.find(p + "attention.query_pre_attn_scalar") != nullptr) {
    TERN_ASSIGN_OR_RETURN(double v, file.get_float(p + "attention.query_pre_attn_scalar"));
    if (!(v > 0.0 && v < 1e9)) return fail(Error::OutOfRange, "%s: query_pre_attn_scalar %g", fname, v);
    scalar = static_cast<float>(v);
  }
  c->attention_scale = 1.0f / std::sqrt(scalar);
  c->rope_local_theta = 10000.0f;
  if (file.find(p + "rope.freq_base_swa") != nullptr) {
    TERN_ASSIGN_OR_RETURN(double v, file.get_float(p + "rope.freq_base_swa"));
    if (!(v > 0.0 && v < 1e12)) return fail(Error::OutOfRange, "%s: rope.freq_base_swa %g", fname, v);
    c->rope_local_theta = static_cast<float>(v);
  }
  if (file.find(p + "attention.sliding_window") == nullptr) return Error::Ok;
  TERN_ASSIGN_OR_RETURN(c->sliding_window, get_u32(file, p + "attention.sliding_window"));
  std::vector<bool> sliding(c->layers);
  const std::string pattern_key = p + "attention.sliding_window_pattern";
  if (file.find(pattern_key) != nullptr && file.find(pattern_key)->type == gguf::ValueType::Array) {
    TERN_ASSIGN_OR_RETURN(std::vector<double> flags, file.get_number_array(pattern_key));
    if (flags.size() != c->layers) {
      return fail(Error::ShapeMismatch, "%s: %s has %zu entries for %u layers", fname, pattern_key.c_str(),
                  flags.size(), c->layers);
    }
    for (uint32_t l = 0; l < c->layers; ++l) sliding[l] = flags[l] != 0.0;
  } else {
    uint64_t period = 6;
    if (file.find(pattern_key) != nullptr) {
      TERN_ASSIGN_OR_RETURN(period, file.get_uint(pattern_key));
    }
    for (uint32_t l = 0; l < c->layers; ++l) sliding[l] = period == 0 || (l + 1) % period != 0;
  }
  for (uint32_t l = 0; l < c->layers; ++l) {
    if (!sliding[l]) continue;
    if (l >= 64) return fail(Error::NotSupported, "%s: sliding layer %u (at most 64 layers may slide)", fname, l);
    c->sliding_layers |= uint64_t{1} << l;
  }
  return Error::Ok;
}

// Expected [out, in] (or [n]) shape of a tensor under `c`.
std::vector<uint64_t> expected_shape(const ModelConfig& c, const WeightSpec& spec) {
  if (spec.cols == TensorDim::None) return {tensor_dim(spec.rows, c)};
  return {tensor_dim(spec.rows, c), tensor_dim(spec.cols, c)};
}

std::string shape_string(const std::vector<uint64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// GGUF dims are innermost first; Tern shapes are outermost first.
std::vector<uint64_t> tern_shape(const TensorInfo& t) { return std::vector<uint64_t>(t.dims.rbegin(), t.dims.rend()); }

Result<TensorIR> convert_tensor(const gguf::File& file, const TensorInfo& t, const std::string& name, bool ternary,
                                const std::vector<uint64_t>& want) {
  TensorIR ir;
  ir.name = name;
  ir.shape = tern_shape(t);
  ir.source = file.name() + ":" + t.name + " (" + type_name(t) + ")";
  if (ir.shape != want) {
    return fail(Error::ShapeMismatch, "%s: tensor '%s' has shape %s, expected %s", file.name().c_str(), t.name.c_str(),
                shape_string(ir.shape).c_str(), shape_string(want).c_str());
  }
  if (ternary) {
    TERN_ASSIGN_OR_RETURN(TernaryTensor tt, gguf_decode_ternary(file, t));
    ir.kind = TensorKind::Ternary;
    ir.codes = std::move(tt.codes);
    ir.scale = tt.scale;
  } else {
    TERN_ASSIGN_OR_RETURN(ir.values, gguf_decode_float(file, t));
    ir.kind = TensorKind::Float;
  }
  return ir;
}

// The shapes, RoPE and norm epsilon under the architecture's key prefix `p` ("bitnet." ...).
Error read_dimensions(const gguf::File& file, const std::string& p, ModelConfig* c) {
  const char* fname = file.name().c_str();
  TERN_ASSIGN_OR_RETURN(c->hidden, get_u32(file, p + "embedding_length"));
  TERN_ASSIGN_OR_RETURN(c->ffn_hidden, get_u32(file, p + "feed_forward_length"));
  TERN_ASSIGN_OR_RETURN(c->layers, get_u32(file, p + "block_count"));
  TERN_ASSIGN_OR_RETURN(c->heads, get_u32(file, p + "attention.head_count"));
  c->kv_heads = c->heads;
  if (file.find(p + "attention.head_count_kv") != nullptr) {
    TERN_ASSIGN_OR_RETURN(c->kv_heads, get_u32(file, p + "attention.head_count_kv"));
  }
  if (c->heads % c->kv_heads != 0) {
    return fail(Error::UnsupportedModel, "%s: %u query heads are not a multiple of %u KV heads", fname, c->heads,
                c->kv_heads);
  }
  if (file.find(p + "attention.key_length") != nullptr) {
    TERN_ASSIGN_OR_RETURN(c->head_dim, get_u32(file, p + "attention.key_length"));
  } else {
    if (c->hidden % c->heads != 0) {
      return fail(Error::UnsupportedModel, "%s: hidden size %u is not a multiple of %u heads", fname, c->hidden,
                  c->heads);
    }
    c->head_dim = c->hidden / c->heads;
  }
  if (file.find(p + "rope.dimension_count") != nullptr) {
    TERN_ASSIGN_OR_RETURN(uint32_t rot, get_u32(file, p + "rope.dimension_count"));
    if (rot != c->head_dim) {
      return fail(Error::NotSupported, "%s: partial RoPE (%u of %u head dims) is not supported", fname, rot,
                  c->head_dim);
    }
  }
  c->max_context = 0;
  if (file.find(p + "context_length") != nullptr) {
    TERN_ASSIGN_OR_RETURN(c->max_context, get_u32(file, p + "context_length"));
  }
  if (file.find(p + "rope.freq_base") != nullptr) {
    TERN_ASSIGN_OR_RETURN(double theta, file.get_float(p + "rope.freq_base"));
    if (!(theta > 0.0 && theta < 1e12)) {
      return fail(Error::OutOfRange, "%s: rope.freq_base %g is out of range", fname, theta);
    }
    c->rope_theta = static_cast<float>(theta);
  }
  // llama.cpp runs arch `bitnet` with NEOX RoPE and its converter does not permute q/k.
  c->rope_style = RopeStyle::RotateHalf;
  TERN_ASSIGN_OR_RETURN(double eps, file.get_float(p + "attention.layer_norm_rms_epsilon"));
  if (!(eps > 0.0 && eps < 1.0)) return fail(Error::OutOfRange, "%s: rms epsilon %g is out of range", fname, eps);
  c->norm_eps = static_cast<float>(eps);
  return Error::Ok;
}

// The model family and FFN activation: the embedding architectures' own, else by activation.
Error read_family(const gguf::File& file, const std::string& arch, ModelConfig* c) {
  const std::string p = arch + ".";
  // The FFN activation: explicit `hidden_activation` when present; otherwise bitnet.cpp's
  // bitnet-b1.58 (2B-4T) is relu², and upstream llama.cpp's `bitnet` (1bitLLM) is SiLU.
  std::string act = arch == "bitnet" ? "silu" : "relu2";
  if (file.find(p + "hidden_activation") != nullptr) {
    TERN_ASSIGN_OR_RETURN(act, file.get_string(p + "hidden_activation"));
  }
  if (arch == "qwen3" || arch == "gemma3") {
    c->family = arch == "qwen3" ? ModelFamily::Qwen3Bitnet : ModelFamily::Gemma3Bitnet;
    TERN_RETURN_IF_ERROR(read_embedding_gguf(file, p, c));
  } else if (act == "relu2") {
    c->family = ModelFamily::Bitnet2B4T;
    c->activation = Activation::Relu2;
  } else if (act == "silu") {
    c->family = ModelFamily::LlamaBitnet;
    c->activation = Activation::Silu;
  } else {
    return fail(Error::UnsupportedModel, "%s: hidden activation '%s' is not supported (relu2, silu)",
                file.name().c_str(), act.c_str());
  }
  return Error::Ok;
}

// Every GGUF tensor must map to a canonical name: nothing is silently dropped.
Error check_tensor_names(const gguf::File& file, const std::string& arch, const ModelConfig& c) {
  const char* fname = file.name().c_str();
  const std::string p = arch + ".";
  // Every layer has at least 9 tensors; a block_count the file cannot hold is corrupt
  // (and must not drive any work).
  if (c.layers > file.tensors().size() / 9) {
    return fail(Error::CorruptFile, "%s: %sblock_count is %u but the file has only %zu tensors", fname, p.c_str(),
                c.layers, file.tensors().size());
  }
  for (const auto& t : file.tensors()) {
    if (!is_known_tensor(t.name, c.layers, c.family)) {
      return fail(Error::UnknownTensor, "%s: unexpected tensor '%s' for arch %s with %u layers", fname, t.name.c_str(),
                  arch.c_str(), c.layers);
    }
  }
  return Error::Ok;
}

// token_embd.weight, whose rows give the vocabulary size (checked against `p`vocab_size).
Result<const TensorInfo*> find_embeddings(const gguf::File& file, const std::string& p, ModelConfig* c) {
  const char* fname = file.name().c_str();
  const TensorInfo* embd = file.find_tensor("token_embd.weight");
  if (embd == nullptr) return fail(Error::UnknownTensor, "%s: tensor 'token_embd.weight' is missing", fname);
  if (embd->dims.size() != 2 || embd->dims[0] != c->hidden || embd->dims[1] == 0 || embd->dims[1] > (1u << 30)) {
    return fail(Error::ShapeMismatch, "%s: token_embd.weight has shape %s, expected [vocab, %u]", fname,
                shape_string(tern_shape(*embd)).c_str(), c->hidden);
  }
  c->vocab = static_cast<uint32_t>(embd->dims[1]);
  if (file.find(p + "vocab_size") != nullptr) {
    TERN_ASSIGN_OR_RETURN(uint64_t vs, file.get_uint(p + "vocab_size"));
    if (vs != c->vocab) {
      return fail(Error::ShapeMismatch, "%s: %svocab_size is %llu but token_embd has %u rows", fname, p.c_str(),
                  static_cast<unsigned long long>(vs), c->vocab);
    }
  }
  return embd;
}

// Every tensor into ir->tensors in the bundle's order: embeddings, each layer's, final norm, lm_head.
Error convert_tensors(const gguf::File& file, const TensorInfo& embd, ModelIR* ir) {
  const char* fname = file.name().c_str();
  const ModelConfig& c = ir->config;
  const std::vector<uint64_t> embed_shape = {c.vocab, c.hidden};
  TERN_ASSIGN_OR_RETURN(TensorIR embeddings,
                        convert_tensor(file, embd, tensor_names::kTokEmbeddings, false, embed_shape));
  ir->tensors.push_back(std::move(embeddings));
  for (uint32_t l = 0; l < c.layers; ++l) {
    for (size_t k = 0; k < kLayerTensorCount; ++k) {
      const WeightSpec& spec = kLayerTensors[k];
      const std::string gname = "blk." + std::to_string(l) + "." + gguf_tensor_name(spec, c.family) + ".weight";
      const TensorInfo* t = file.find_tensor(gname);
      if (t == nullptr) {
        if (!tensor_required(spec, c)) continue;
        return fail(Error::UnknownTensor, "%s: tensor '%s' is missing", fname, gname.c_str());
      }
      TERN_ASSIGN_OR_RETURN(TensorIR tensor, convert_tensor(file, *t, "layers." + std::to_string(l) + "." + spec.name,
                                                            spec.ternary, expected_shape(c, spec)));
      ir->tensors.push_back(std::move(tensor));
    }
  }
  const TensorInfo* norm = file.find_tensor("output_norm.weight");
  if (norm == nullptr) return fail(Error::UnknownTensor, "%s: tensor 'output_norm.weight' is missing", fname);
  TERN_ASSIGN_OR_RETURN(TensorIR final_norm, convert_tensor(file, *norm, tensor_names::kFinalNorm, false, {c.hidden}));
  ir->tensors.push_back(std::move(final_norm));
  if (const TensorInfo* out = file.find_tensor("output.weight")) {
    TERN_ASSIGN_OR_RETURN(TensorIR lm_head, convert_tensor(file, *out, tensor_names::kLmHead, false, embed_shape));
    ir->tensors.push_back(std::move(lm_head));
  }
  return Error::Ok;
}

// Tokenizer: an explicit path wins; else the GGUF's own. Its special ids go into the config.
Error read_tokenizer(const gguf::File& file, const ConvertOptions& options, ModelIR* ir) {
  const char* fname = file.name().c_str();
  ModelConfig& c = ir->config;
  if (!options.tokenizer_path.empty()) {
    TERN_ASSIGN_OR_RETURN(ir->tokenizer, import_tokenizer(options.tokenizer_path));
  } else if (file.find("tokenizer.ggml.model") != nullptr) {
    TERN_ASSIGN_OR_RETURN(ir->tokenizer, gguf_import_tokenizer(file));
  } else if (options.require_tokenizer) {
    return fail(Error::NotFound, "%s: no tokenizer.ggml.* metadata and no tokenizer given", fname);
  }
  if (ir->tokenizer.type != TokenizerType::Unknown) {
    // Embedding tables may be padded past the tokenizer, never the other way round.
    if (ir->tokenizer.pieces.size() > c.vocab) {
      return fail(Error::ShapeMismatch, "%s: tokenizer has %zu tokens but token_embd only %u rows", fname,
                  ir->tokenizer.pieces.size(), c.vocab);
    }
    c.bos_id = ir->tokenizer.bos_id;
    c.eos_id = ir->tokenizer.eos_id;
    c.eot_id = ir->tokenizer.eot_id;
    c.embedding_append_eos = c.embedding && ir->tokenizer.add_eos && ir->tokenizer.eos_id >= 0;
  }
  return Error::Ok;
}

// "gguf-" and the type of the first query projection (f16 without one).
std::string source_format(const gguf::File& file) {
  std::string kind = "f16";
  for (const auto& t : file.tensors()) {
    if (t.name.find("attn_q.weight") != std::string::npos) {
      kind = type_name(t);
      break;
    }
  }
  return "gguf-" + kind;
}

}  // namespace

Result<ModelIR> import_gguf(const gguf::File& file, const ConvertOptions& options) {
  const char* fname = file.name().c_str();
  ModelIR ir;
  ir.source_path = file.name();
  TERN_ASSIGN_OR_RETURN(std::string arch, file.get_string("general.architecture"));
  const bool embedding = arch == "qwen3" || arch == "gemma3";
  if (arch != "bitnet" && arch != "bitnet-b1.58" && arch != "bitnet-25" && !embedding) {
    return fail(Error::UnsupportedModel,
                "%s: architecture '%s' is not supported (bitnet, bitnet-b1.58; qwen3 / gemma3 embedding models)", fname,
                arch.c_str());
  }
  const std::string p = arch + ".";
  ModelConfig& c = ir.config;
  TERN_RETURN_IF_ERROR(read_dimensions(file, p, &c));
  TERN_RETURN_IF_ERROR(read_family(file, arch, &c));
  TERN_RETURN_IF_ERROR(check_tensor_names(file, arch, c));
  TERN_ASSIGN_OR_RETURN(const TensorInfo* embd, find_embeddings(file, p, &c));
  if (!embedding) c.has_sub_norms = file.find_tensor("blk.0.attn_sub_norm.weight") != nullptr;
  c.tied_embeddings = file.find_tensor("output.weight") == nullptr;
  if (embedding && !c.tied_embeddings) {
    return fail(Error::UnsupportedModel, "%s: an embedding model has no output.weight", fname);
  }
  TERN_RETURN_IF_ERROR(convert_tensors(file, *embd, &ir));
  TERN_RETURN_IF_ERROR(read_tokenizer(file, options, &ir));
  ir.source_format = source_format(file);
  return ir;
}

Result<ModelIR> import_gguf(const std::string& path, const ConvertOptions& options) {
  TERN_ASSIGN_OR_RETURN(gguf::File file, gguf::File::open(path));
  return import_gguf(file, options);
}

}  // namespace tern::convert
