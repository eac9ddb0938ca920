// What each model family is made of, in one place: its traits (how the forward pass
// differs) and the table of tensors a bundle holds for it (name, ternary or dense, shape,
// when it is required, and its names in the checkpoint formats we import). The bundle
// check, the model loader and the importers all read these tables, so a new family is one
// row in kFamilies (plus rows in the tensor tables if it brings new tensors).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dense_matmul.h"
#include "kernels/ternary_matmul.h"
#include "platform/error.h"
#include "runtime/model/model_config.h"

namespace tern {

// A 1-D weight (norm) as stored; data == nullptr means absent.
struct VectorView {
  DenseType type = DenseType::F32;  // F32, F16 or BF16
  const void* data = nullptr;
  size_t size = 0;
};

struct LayerWeights {
  VectorView attn_norm, attn_sub_norm, ffn_norm, ffn_sub_norm;
  TernaryMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
  // The embedding families: an RMSNorm on the input of each ternary linear (wo's and
  // w_down's are attn_sub_norm and ffn_sub_norm), q/k head norms, Gemma3's post norms.
  VectorView wq_in_norm, wk_in_norm, wv_in_norm, w_gate_in_norm, w_up_in_norm;
  VectorView q_norm, k_norm, post_attn_norm, post_ffn_norm;
};

// The same norms converted to f32 at load: what the forward pass reads (null: absent).
struct LayerRuntime {
  const float* attn_norm = nullptr;
  const float* attn_sub_norm = nullptr;
  const float* ffn_norm = nullptr;
  const float* ffn_sub_norm = nullptr;
  const float* wq_in_norm = nullptr;
  const float* wk_in_norm = nullptr;
  const float* wv_in_norm = nullptr;
  const float* w_gate_in_norm = nullptr;
  const float* w_up_in_norm = nullptr;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  const float* post_attn_norm = nullptr;
  const float* post_ffn_norm = nullptr;
};

// Views of every weight; the memory they point at must outlive the Model.
struct ModelWeights {
  DenseMatrix tok_embeddings;
  DenseMatrix lm_head;  // == tok_embeddings when tied
  VectorView final_norm;
  const LayerWeights* layers = nullptr;  // config.layers entries
};

struct FamilyTraits {
  ModelFamily family;
  const char* name;  // as tern-inspect prints it
  // Per-layer RMSNorm weights (attn_norm, ffn_norm). Without them, every ternary linear's
  // input goes through the parameter-free norm a / (rms(a) * n) instead (bitllama2.c).
  bool layer_norms;
  // A weighted RMSNorm of its own on the input of wq, wk, wv, w_gate and w_up (BitNet
  // embedding models' BitLinear), after attn_norm / ffn_norm.
  bool projection_norms;
  // RMSNorm over each query and key head (head_dim weights shared by the heads), before RoPE.
  bool qk_norms;
  // RMSNorm of the attention and FFN outputs before they join the residual (Gemma3).
  bool post_norms;
  // Hugging Face stores the model's own norms as w for x * (1 + w) (Gemma): the importer
  // adds one (the BitLinear input norms are plain x * w and keep their values).
  bool hf_norms_plus_one;
};

// Null for Unknown or a family this build does not know.
const FamilyTraits* family_traits(ModelFamily family);

// A dimension of a tensor, resolved against a ModelConfig.
enum class TensorDim : uint8_t { None, Hidden, QueryDim, KvDim, Ffn, Vocab, HeadDim };
uint64_t tensor_dim(TensorDim dim, const ModelConfig& config);

enum class TensorRequired : uint8_t {
  Always,
  LayerNorms,       // the family has per-layer norms
  SubNorms,         // config.has_sub_norms
  Untied,           // !config.tied_embeddings
  ProjectionNorms,  // the family's traits say so
  QkNorms,
  PostNorms,
};

struct WeightSpec {
  const char* name;  // bundle name; per-layer tensors are "layers.<i>." + name
  bool ternary;      // a ternary matrix, else a dense one (matrix or vector)
  TensorDim rows;
  TensorDim cols;  // None: a vector of `rows` values
  TensorRequired required;
  const char* gguf;  // GGUF name: per layer "blk.<i>." + gguf + ".weight", else gguf + ".weight"
  const char* hf;    // Hugging Face name: per layer "model.layers.<i>." + hf (ternary: + ".weight"/".weight_scale")
  // Where the model loader puts a per-layer tensor (exactly one is set).
  TernaryMatrix LayerWeights::*ternary_field;
  VectorView LayerWeights::*vector_field;
  // A vector's f32 copy for the forward pass.
  const float* LayerRuntime::*runtime_field = nullptr;
  // The norm inside a BitLinear (the input of one ternary linear), not the model's own: a
  // plain x * w in every family.
  bool linear_input_norm = false;
};

// A family whose checkpoints name a tensor differently from the tables (and "" for none).
const char* hf_tensor_name(const WeightSpec& spec, ModelFamily family);
const char* gguf_tensor_name(const WeightSpec& spec, ModelFamily family);

// The per-layer tensors, in the order the importers write them, and the model-wide ones.
extern const WeightSpec kLayerTensors[];
extern const size_t kLayerTensorCount;
extern const WeightSpec kGlobalTensors[];  // tok_embeddings, norm, lm_head
extern const size_t kGlobalTensorCount;
const WeightSpec& global_tensor(const char* name);  // one of kGlobalTensors by name

bool tensor_required(const WeightSpec& spec, const ModelConfig& config);
// "layers.<layer>.<spec.name>" into buf; false if it does not fit.
bool layer_tensor_name(const WeightSpec& spec, uint32_t layer, char* buf, size_t size);

// Checks a config's family and dimensions (zero sizes, whole GQA groups, even head_dim,
// norm_eps and rope_theta ranges): UnsupportedModel / InvalidBundle with a message.
Error validate_config(const ModelConfig& config);

}  // namespace tern
