#include "runtime/model/model_family.h"

#include <cstdio>
#include <cstring>

#include "runtime/model/tensor_names.h"

namespace tern {

namespace {

// family, name, layer_norms, projection_norms, qk_norms, post_norms, hf_norms_plus_one
constexpr FamilyTraits kFamilies[] = {
    {ModelFamily::Bitnet2B4T, "bitnet-2b4t", true, false, false, false, false},
    {ModelFamily::LlamaBitnet, "llama-bitnet", true, false, false, false, false},
    {ModelFamily::Bitllama2c, "bitllama2c", false, false, false, false, false},
    {ModelFamily::Qwen3Bitnet, "qwen3-bitnet", true, true, true, false, false},
    {ModelFamily::Gemma3Bitnet, "gemma3-bitnet", true, true, true, true, true},
};

// Names a family's checkpoints give a tensor of the tables. In the BitNet embedding models
// the BitLinear norms of o_proj and down_proj sit where 2B-4T's sub-norms do.
struct FamilyTensorName {
  ModelFamily family;
  const char* tensor;
  const char* gguf;
  const char* hf;
};
constexpr FamilyTensorName kFamilyTensorNames[] = {
    {ModelFamily::Qwen3Bitnet, tensor_names::kAttnSubNorm, "attn_output_norm_in", "self_attn.o_proj.norm.weight"},
    {ModelFamily::Qwen3Bitnet, tensor_names::kFfnSubNorm, "ffn_down_norm_in", "mlp.down_proj.norm.weight"},
    {ModelFamily::Gemma3Bitnet, tensor_names::kAttnSubNorm, "attn_output_norm_in", "self_attn.o_proj.norm.weight"},
    {ModelFamily::Gemma3Bitnet, tensor_names::kFfnSubNorm, "ffn_down_norm_in", "mlp.down_proj.norm.weight"},
    {ModelFamily::Gemma3Bitnet, tensor_names::kFfnNorm, "ffn_norm", "pre_feedforward_layernorm.weight"},
};

const FamilyTensorName* family_name(const WeightSpec& spec, ModelFamily family) {
  for (const FamilyTensorName& f : kFamilyTensorNames) {
    if (f.family == family && std::strcmp(f.tensor, spec.name) == 0) return &f;
  }
  return nullptr;
}

using D = TensorDim;
using R = TensorRequired;
namespace n = tensor_names;

}  // namespace

const WeightSpec kLayerTensors[] = {
    {n::kAttnNorm, false, D::Hidden, D::None, R::LayerNorms, "attn_norm", "input_layernorm.weight", nullptr,
     &LayerWeights::attn_norm, &LayerRuntime::attn_norm},
    {n::kWq, true, D::QueryDim, D::Hidden, R::Always, "attn_q", "self_attn.q_proj", &LayerWeights::wq, nullptr},
    {n::kWk, true, D::KvDim, D::Hidden, R::Always, "attn_k", "self_attn.k_proj", &LayerWeights::wk, nullptr},
    {n::kWv, true, D::KvDim, D::Hidden, R::Always, "attn_v", "self_attn.v_proj", &LayerWeights::wv, nullptr},
    {n::kAttnSubNorm, false, D::QueryDim, D::None, R::SubNorms, "attn_sub_norm", "self_attn.attn_sub_norm.weight",
     nullptr, &LayerWeights::attn_sub_norm, &LayerRuntime::attn_sub_norm, true},
    {n::kWo, true, D::Hidden, D::QueryDim, R::Always, "attn_output", "self_attn.o_proj", &LayerWeights::wo, nullptr},
    {n::kFfnNorm, false, D::Hidden, D::None, R::LayerNorms, "ffn_norm", "post_attention_layernorm.weight", nullptr,
     &LayerWeights::ffn_norm, &LayerRuntime::ffn_norm},
    {n::kWGate, true, D::Ffn, D::Hidden, R::Always, "ffn_gate", "mlp.gate_proj", &LayerWeights::w_gate, nullptr},
    {n::kWUp, true, D::Ffn, D::Hidden, R::Always, "ffn_up", "mlp.up_proj", &LayerWeights::w_up, nullptr},
    {n::kFfnSubNorm, false, D::Ffn, D::None, R::SubNorms, "ffn_sub_norm", "mlp.ffn_sub_norm.weight", nullptr,
     &LayerWeights::ffn_sub_norm, &LayerRuntime::ffn_sub_norm, true},
    {n::kWDown, true, D::Hidden, D::Ffn, R::Always, "ffn_down", "mlp.down_proj", &LayerWeights::w_down, nullptr},
    {n::kWqInNorm, false, D::Hidden, D::None, R::ProjectionNorms, "attn_q_norm_in", "self_attn.q_proj.norm.weight",
     nullptr, &LayerWeights::wq_in_norm, &LayerRuntime::wq_in_norm, true},
    {n::kWkInNorm, false, D::Hidden, D::None, R::ProjectionNorms, "attn_k_norm_in", "self_attn.k_proj.norm.weight",
     nullptr, &LayerWeights::wk_in_norm, &LayerRuntime::wk_in_norm, true},
    {n::kWvInNorm, false, D::Hidden, D::None, R::ProjectionNorms, "attn_v_norm_in", "self_attn.v_proj.norm.weight",
     nullptr, &LayerWeights::wv_in_norm, &LayerRuntime::wv_in_norm, true},
    {n::kWGateInNorm, false, D::Hidden, D::None, R::ProjectionNorms, "ffn_gate_norm_in", "mlp.gate_proj.norm.weight",
     nullptr, &LayerWeights::w_gate_in_norm, &LayerRuntime::w_gate_in_norm, true},
    {n::kWUpInNorm, false, D::Hidden, D::None, R::ProjectionNorms, "ffn_up_norm_in", "mlp.up_proj.norm.weight", nullptr,
     &LayerWeights::w_up_in_norm, &LayerRuntime::w_up_in_norm, true},
    {n::kQNorm, false, D::HeadDim, D::None, R::QkNorms, "attn_q_norm", "self_attn.q_norm.weight", nullptr,
     &LayerWeights::q_norm, &LayerRuntime::q_norm},
    {n::kKNorm, false, D::HeadDim, D::None, R::QkNorms, "attn_k_norm", "self_attn.k_norm.weight", nullptr,
     &LayerWeights::k_norm, &LayerRuntime::k_norm},
    {n::kPostAttnNorm, false, D::Hidden, D::None, R::PostNorms, "post_attention_norm",
     "post_attention_layernorm.weight", nullptr, &LayerWeights::post_attn_norm, &LayerRuntime::post_attn_norm},
    {n::kPostFfnNorm, false, D::Hidden, D::None, R::PostNorms, "post_ffw_norm", "post_feedforward_layernorm.weight",
     nullptr, &LayerWeights::post_ffn_norm, &LayerRuntime::post_ffn_norm},
};
const size_t kLayerTensorCount = sizeof(kLayerTensors) / sizeof(kLayerTensors[0]);

const WeightSpec kGlobalTensors[] = {
    {n::kTokEmbeddings, false, D::Vocab, D::Hidden, R::Always, "token_embd", "model.embed_tokens.weight", nullptr,
     nullptr},
    {n::kFinalNorm, false, D::Hidden, D::None, R::Always, "output_norm", "model.norm.weight", nullptr, nullptr},
    {n::kLmHead, false, D::Vocab, D::Hidden, R::Untied, "output", "lm_head.weight", nullptr, nullptr},
};
const size_t kGlobalTensorCount = sizeof(kGlobalTensors) / sizeof(kGlobalTensors[0]);

const FamilyTraits* family_traits(ModelFamily family) {
  for (const FamilyTraits& f : kFamilies) {
    if (f.family == family) return &f;
  }
  return nullptr;
}

const WeightSpec& global_tensor(const char* name) {
  for (const WeightSpec& s : kGlobalTensors) {
    if (std::strcmp(s.name, name) == 0) return s;
  }
  return kGlobalTensors[0];  // callers pass tensor_names constants; unreachable otherwise
}

uint64_t tensor_dim(TensorDim dim, const ModelConfig& c) {
  switch (dim) {
    case TensorDim::None: return 0;
    case TensorDim::Hidden: return c.hidden;
    case TensorDim::QueryDim: return uint64_t{c.heads} * c.head_dim;
    case TensorDim::KvDim: return uint64_t{c.kv_heads} * c.head_dim;
    case TensorDim::Ffn: return c.ffn_hidden;
    case TensorDim::Vocab: return c.vocab;
    case TensorDim::HeadDim: return c.head_dim;
  }
  return 0;
}

bool tensor_required(const WeightSpec& spec, const ModelConfig& c) {
  switch (spec.required) {
    case TensorRequired::Always: return true;
    case TensorRequired::LayerNorms: {
      const FamilyTraits* f = family_traits(c.family);
      return f != nullptr && f->layer_norms;
    }
    case TensorRequired::SubNorms: return c.has_sub_norms;
    case TensorRequired::Untied: return !c.tied_embeddings;
    case TensorRequired::ProjectionNorms:
    case TensorRequired::QkNorms:
    case TensorRequired::PostNorms: {
      const FamilyTraits* f = family_traits(c.family);
      if (f == nullptr) return false;
      if (spec.required == TensorRequired::ProjectionNorms) return f->projection_norms;
      return spec.required == TensorRequired::QkNorms ? f->qk_norms : f->post_norms;
    }
  }
  return true;
}

const char* hf_tensor_name(const WeightSpec& spec, ModelFamily family) {
  const FamilyTensorName* f = family_name(spec, family);
  return f != nullptr ? f->hf : spec.hf;
}

const char* gguf_tensor_name(const WeightSpec& spec, ModelFamily family) {
  const FamilyTensorName* f = family_name(spec, family);
  return f != nullptr ? f->gguf : spec.gguf;
}

bool layer_tensor_name(const WeightSpec& spec, uint32_t layer, char* buf, size_t size) {
  const int n = std::snprintf(buf, size, "layers.%u.%s", layer, spec.name);
  return n > 0 && static_cast<size_t>(n) < size;
}

Error validate_config(const ModelConfig& c) {
  if (family_traits(c.family) == nullptr) {
    return fail(Error::UnsupportedModel, "model family %u is not supported", static_cast<unsigned>(c.family));
  }
  if (c.hidden == 0 || c.layers == 0 || c.heads == 0 || c.kv_heads == 0 || c.head_dim == 0 || c.vocab == 0 ||
      c.ffn_hidden == 0) {
    return fail(Error::InvalidBundle, "config has a zero dimension (hidden %u, layers %u, heads %u/%u, head_dim %u)",
                c.hidden, c.layers, c.heads, c.kv_heads, c.head_dim);
  }
  if (c.heads % c.kv_heads != 0 || c.head_dim % 2 != 0) {
    return fail(Error::InvalidBundle, "%u heads over %u KV heads of dim %u: need a whole group and an even dim",
                c.heads, c.kv_heads, c.head_dim);
  }
  if (!(c.norm_eps >= 0.0f) || !(c.rope_theta > 0.0f)) {
    return fail(Error::InvalidBundle, "config norm_eps %g / rope_theta %g out of range", c.norm_eps, c.rope_theta);
  }
  if (!(c.embedding_scale > 0.0f && c.embedding_scale < 1e6f) ||
      !(c.attention_scale >= 0.0f && c.attention_scale < 1e6f) ||
      !(c.rope_local_theta >= 0.0f && c.rope_local_theta < 1e30f)) {
    return fail(Error::InvalidBundle,
                "config embedding_scale %g / attention_scale %g / rope_local_theta %g out of range", c.embedding_scale,
                c.attention_scale, c.rope_local_theta);
  }
  if (static_cast<uint32_t>(c.activation) > static_cast<uint32_t>(Activation::GeluTanh) ||
      static_cast<uint32_t>(c.pooling) > static_cast<uint32_t>(Pooling::First)) {
    return fail(Error::UnsupportedModel, "config activation %u / pooling %u unknown",
                static_cast<unsigned>(c.activation), static_cast<unsigned>(c.pooling));
  }
  if (c.sliding_layers != 0 && c.sliding_window == 0) {
    return fail(Error::InvalidBundle, "config has sliding-window layers but no sliding_window");
  }
  return Error::Ok;
}

}  // namespace tern
