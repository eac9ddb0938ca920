// What a model is, independent of where it came from. The converter fills it from each
// checkpoint format; the bundle stores it; the forward pass reads it.
#pragma once

#include <cstdint>

namespace tern {

// Architecture families. Each names a forward pass, not a file format.
enum class ModelFamily : uint8_t {
  Unknown = 0,
  Bitnet2B4T = 1,    // HF BitNetForCausalLM / GGUF bitnet, bitnet-b1.58: relu² FFN, attn/ffn sub-norms
  LlamaBitnet = 2,   // 1bitLLM bitnet_b1_58-*: LLaMA layout, SiLU-gated FFN
  Bitllama2c = 3,    // bitllama2.c: parameter-free norm before every ternary linear
  Qwen3Bitnet = 4,   // BitNet-embedding-0.6B: Qwen3 layers, an RMSNorm before every ternary linear, q/k head norms
  Gemma3Bitnet = 5,  // BitNet-embedding-270M: Gemma3 layers (post-attention/FFN norms, sliding windows) + the same
};

enum class Activation : uint8_t { Relu2 = 0, Silu = 1, GeluTanh = 2 };

// How an embedding model turns a text's hidden states into one vector.
enum class Pooling : uint8_t { Last = 0, Mean = 1, First = 2 };

// How RoPE pairs dimensions within a head.
enum class RopeStyle : uint8_t {
  RotateHalf = 0,     // (i, i + d/2): HF LLaMA / NEOX
  AdjacentPairs = 1,  // (2i, 2i + 1): llama2.c, GGML "normal"
};

struct ModelConfig {
  ModelFamily family = ModelFamily::Unknown;
  uint32_t hidden = 0;      // model dimension
  uint32_t ffn_hidden = 0;  // intermediate size
  uint32_t layers = 0;
  uint32_t heads = 0;  // query heads
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t vocab = 0;
  uint32_t max_context = 0;  // positions the model was trained for
  float rope_theta = 10000.0f;
  RopeStyle rope_style = RopeStyle::RotateHalf;
  float norm_eps = 1e-5f;
  Activation activation = Activation::Relu2;
  bool has_sub_norms = false;   // attn_sub_norm / ffn_sub_norm present
  bool tied_embeddings = true;  // lm_head shares tok_embeddings
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t eot_id = -1;            // end of turn (chat), -1 if none
  float embedding_scale = 1.0f;   // token embeddings times this (Gemma3: sqrt(hidden))
  float attention_scale = 0.0f;   // 0: 1 / sqrt(head_dim) (Gemma3: query_pre_attn_scalar^-1/2)
  float rope_local_theta = 0.0f;  // RoPE base of sliding-window layers; 0: rope_theta
  uint32_t sliding_window = 0;    // keys a sliding layer's query sees, itself included; 0: none
  uint64_t sliding_layers = 0;    // bit l: layer l uses the sliding window (layers < 64)
  // Embedding models (a bundle's Embedding table): no logits, one vector per text.
  bool embedding = false;
  Pooling pooling = Pooling::Last;
  bool embedding_normalize = true;
  bool embedding_append_eos = false;  // EOS after every text (what last-token pooling reads)
};

inline bool layer_is_sliding(const ModelConfig& c, uint32_t layer) {
  return c.sliding_window > 0 && layer < 64 && ((c.sliding_layers >> layer) & 1u) != 0;
}

}  // namespace tern
