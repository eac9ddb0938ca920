#include "runtime/model_family.h"

#include <cstdio>
#include <cstring>

#include "runtime/tensor_names.h"

namespace tern {

namespace {

constexpr FamilyTraits kFamilies[] = {
    {ModelFamily::Bitnet2B4T, "bitnet-2b4t", true},
    {ModelFamily::LlamaBitnet, "llama-bitnet", true},
    {ModelFamily::Bitllama2c, "bitllama2c", false},
};

using D = TensorDim;
using R = TensorRequired;
namespace n = tensor_names;

}  // namespace

const WeightSpec kLayerTensors[] = {
    {n::kAttnNorm, false, D::Hidden, D::None, R::LayerNorms, "attn_norm", "input_layernorm.weight", nullptr,
     &LayerWeights::attn_norm},
    {n::kWq, true, D::QueryDim, D::Hidden, R::Always, "attn_q", "self_attn.q_proj", &LayerWeights::wq, nullptr},
    {n::kWk, true, D::KvDim, D::Hidden, R::Always, "attn_k", "self_attn.k_proj", &LayerWeights::wk, nullptr},
    {n::kWv, true, D::KvDim, D::Hidden, R::Always, "attn_v", "self_attn.v_proj", &LayerWeights::wv, nullptr},
    {n::kAttnSubNorm, false, D::QueryDim, D::None, R::SubNorms, "attn_sub_norm", "self_attn.attn_sub_norm.weight",
     nullptr, &LayerWeights::attn_sub_norm},
    {n::kWo, true, D::Hidden, D::QueryDim, R::Always, "attn_output", "self_attn.o_proj", &LayerWeights::wo, nullptr},
    {n::kFfnNorm, false, D::Hidden, D::None, R::LayerNorms, "ffn_norm", "post_attention_layernorm.weight", nullptr,
     &LayerWeights::ffn_norm},
    {n::kWGate, true, D::Ffn, D::Hidden, R::Always, "ffn_gate", "mlp.gate_proj", &LayerWeights::w_gate, nullptr},
    {n::kWUp, true, D::Ffn, D::Hidden, R::Always, "ffn_up", "mlp.up_proj", &LayerWeights::w_up, nullptr},
    {n::kFfnSubNorm, false, D::Ffn, D::None, R::SubNorms, "ffn_sub_norm", "mlp.ffn_sub_norm.weight", nullptr,
     &LayerWeights::ffn_sub_norm},
    {n::kWDown, true, D::Hidden, D::Ffn, R::Always, "ffn_down", "mlp.down_proj", &LayerWeights::w_down, nullptr},
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
  }
  return true;
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
  return Error::Ok;
}

}  // namespace tern
