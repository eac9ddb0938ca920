// The converter's in-memory model: what every importer produces and the bundle writer
// consumes. Host-only (std containers); weights are already in Tern's conventions:
// ternary codes in {-1, 0, +1} row-major [out][in] with one multiply-convention scale
// (dequantized weight = code * scale), float tensors as float32.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/model/model_config.h"

namespace tern::convert {

enum class TensorKind : uint8_t {
  Float,    // float32 values (norm weights, embeddings before the --embed choice)
  Ternary,  // codes + scale
};

struct TensorIR {
  std::string name;             // canonical Tern name (see tensor_names.h)
  std::vector<uint64_t> shape;  // [out, in] for matrices, [n] for vectors
  TensorKind kind = TensorKind::Float;
  std::vector<float> values;  // Float
  std::vector<int8_t> codes;  // Ternary, row-major
  float scale = 1.0f;         // Ternary: dequantized weight = code * scale
  std::string source;         // where it came from (file and original name), for messages

  uint64_t elements() const {
    uint64_t n = 1;
    for (uint64_t d : shape) n *= d;
    return n;
  }
};

enum class TokenizerType : uint8_t { Unknown = 0, ByteLevelBpe = 1, SentencePieceBpe = 2, SentencePieceUnigram = 3 };
enum class PreTokenizer : uint8_t { None = 0, Llama3 = 1, Qwen2 = 2 };
enum class TokenAttr : uint8_t { Normal = 0, Control = 1, Byte = 2, Unknown = 3, UserDefined = 4, Unused = 5 };

struct TokenizerIR {
  TokenizerType type = TokenizerType::Unknown;
  PreTokenizer pretokenizer = PreTokenizer::None;
  std::vector<std::string> pieces;                    // raw bytes (byte-level BPE) or SentencePiece pieces
  std::vector<float> scores;                          // SentencePiece only
  std::vector<TokenAttr> attrs;                       // one per piece
  std::vector<std::pair<uint32_t, uint32_t>> merges;  // rank order
  int32_t bos_id = -1, eos_id = -1, eot_id = -1, unk_id = -1, pad_id = -1;
  bool add_bos = true;
  bool add_dummy_prefix = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
  std::string chat_template;              // the Jinja text as shipped
  bool remove_extra_whitespaces = false;  // SentencePiece normalizer option
  std::string unk_surface;                // SentencePiece: decoded text of <unk> ("" = default)
  bool nfc = false;                       // tokenizer.json's NFC normalizer
  bool add_eos = false;                   // tokenizer_config.json add_eos_token
  int32_t template_eos_id = -1;           // the special token tokenizer.json's template puts after a text
};

// What an embedding model's bundle says besides its config (pooling, normalization and
// the EOS rule are in ModelConfig): the named prompts put in front of texts.
struct EmbeddingPromptsIR {
  std::vector<std::pair<std::string, std::string>> prompts;  // name, text (sentence-transformers "prompts")
  std::string default_prompt;                                // "" for none
};

struct ModelIR {
  ModelConfig config;
  EmbeddingPromptsIR embedding;  // config.embedding only
  std::vector<TensorIR> tensors;
  TokenizerIR tokenizer;
  std::string source_format;  // "hf-safetensors-packed", "gguf-tq2_0", "bitllama2c", "synthetic-2b4t", ...
  std::string source_path;

  const TensorIR* find(const std::string& name) const {
    for (const auto& t : tensors) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }
};

}  // namespace tern::convert
