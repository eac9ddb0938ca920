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
#include "runtime/model_config.h"

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
  const char* name;          // as tern-inspect prints it
  // Per-layer RMSNorm weights (attn_norm, ffn_norm). Without them, every ternary linear's
  // input goes through the parameter-free norm a / (rms(a) * n) instead (bitllama2.c).
  bool layer_norms;
};

// Null for Unknown or a family this build does not know.
const FamilyTraits* family_traits(ModelFamily family);

// A dimension of a tensor, resolved against a ModelConfig.
enum class TensorDim : uint8_t { None, Hidden, QueryDim, KvDim, Ffn, Vocab };
uint64_t tensor_dim(TensorDim dim, const ModelConfig& config);

enum class TensorRequired : uint8_t {
  Always,
  LayerNorms,  // the family has per-layer norms
  SubNorms,    // config.has_sub_norms
  Untied,      // !config.tied_embeddings
};

struct WeightSpec {
  const char* name;  // bundle name; per-layer tensors are "layers.<i>." + name
  bool ternary;      // a ternary matrix, else a dense one (matrix or vector)
  TensorDim rows;
  TensorDim cols;    // None: a vector of `rows` values
  TensorRequired required;
  const char* gguf;  // GGUF name: per layer "blk.<i>." + gguf + ".weight", else gguf + ".weight"
  const char* hf;    // Hugging Face name: per layer "model.layers.<i>." + hf (ternary: + ".weight"/".weight_scale")
  // Where the model loader puts a per-layer tensor (exactly one is set).
  TernaryMatrix LayerWeights::*ternary_field;
  VectorView LayerWeights::*vector_field;
};

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
