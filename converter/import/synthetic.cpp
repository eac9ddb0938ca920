#include "converter/import/synthetic.h"

#include "converter/tokenizer/tokenizer_import.h"

#include <cmath>

#include "runtime/base/hash.h"
#include "runtime/model/model_family.h"
#include "runtime/model/tensor_names.h"

namespace tern::convert {
namespace {

// splitmix64: fast, seedable, good enough for random weights.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
};

uint64_t tensor_seed(uint64_t seed, const std::string& name) {
  return fnv1a(name.data(), name.size(), seed ^ kFnv1aBasis);
}

}  // namespace

Result<ModelConfig> synthetic_config(const std::string& preset) {
  ModelConfig c;
  if (preset == "2b4t") {
    c.family = ModelFamily::Bitnet2B4T;
    c.hidden = 2560, c.ffn_hidden = 6912, c.layers = 30, c.heads = 20, c.kv_heads = 5, c.head_dim = 128;
    c.vocab = 128256, c.max_context = 4096, c.rope_theta = 500000.0f, c.activation = Activation::Relu2;
    c.has_sub_norms = true, c.tied_embeddings = true;
  } else if (preset == "large") {
    c.family = ModelFamily::LlamaBitnet;
    c.hidden = 1536, c.ffn_hidden = 4096, c.layers = 24, c.heads = 16, c.kv_heads = 16, c.head_dim = 96;
    c.vocab = 32002, c.max_context = 2048, c.rope_theta = 10000.0f, c.activation = Activation::Silu;
    c.has_sub_norms = false, c.tied_embeddings = false;
  } else if (preset == "3b") {
    c.family = ModelFamily::LlamaBitnet;
    c.hidden = 3200, c.ffn_hidden = 8640, c.layers = 26, c.heads = 32, c.kv_heads = 32, c.head_dim = 100;
    c.vocab = 32002, c.max_context = 2048, c.rope_theta = 10000.0f, c.activation = Activation::Silu;
    c.has_sub_norms = false, c.tied_embeddings = false;
  } else if (preset == "tiny") {
    c.family = ModelFamily::Bitnet2B4T;
    c.hidden = 256, c.ffn_hidden = 768, c.layers = 4, c.heads = 4, c.kv_heads = 2, c.head_dim = 64;
    c.vocab = 512, c.max_context = 4096, c.rope_theta = 500000.0f, c.activation = Activation::Relu2;
    c.has_sub_norms = true, c.tied_embeddings = true;
  } else if (preset == "embed-0.6b") {  // BitNet-embedding-0.6B: Qwen3-0.6B layers
    c.family = ModelFamily::Qwen3Bitnet;
    c.hidden = 1024, c.ffn_hidden = 3072, c.layers = 28, c.heads = 16, c.kv_heads = 8, c.head_dim = 128;
    c.vocab = 151936, c.max_context = 32768, c.rope_theta = 1000000.0f, c.activation = Activation::Silu;
  } else if (preset == "embed-270m") {  // BitNet-embedding-270M: Gemma3-270M layers
    c.family = ModelFamily::Gemma3Bitnet;
    c.hidden = 640, c.ffn_hidden = 2048, c.layers = 18, c.heads = 4, c.kv_heads = 1, c.head_dim = 256;
    c.vocab = 262144, c.max_context = 32768, c.rope_theta = 1000000.0f, c.activation = Activation::GeluTanh;
    c.rope_local_theta = 10000.0f, c.sliding_window = 512,
    c.attention_scale = 1.0f / 16.0f;  // query_pre_attn_scalar 256
    c.embedding_scale = std::sqrt(640.0f);
    for (uint32_t l = 0; l < c.layers; ++l) {
      if ((l + 1) % 6 != 0) c.sliding_layers |= uint64_t{1} << l;  // every 6th layer attends fully
    }
  } else {
    return fail(Error::InvalidArgument, "unknown synthetic preset '%s' (2b4t, large, 3b, tiny, embed-0.6b, embed-270m)",
                preset.c_str());
  }
  if (c.family == ModelFamily::Qwen3Bitnet || c.family == ModelFamily::Gemma3Bitnet) {
    c.has_sub_norms = true, c.tied_embeddings = true;
    c.embedding = true, c.pooling = Pooling::Last, c.embedding_normalize = true, c.embedding_append_eos = true;
  }
  c.rope_style = RopeStyle::RotateHalf;
  c.norm_eps = c.embedding ? 1e-6f : 1e-5f;
  c.bos_id = 256;
  c.eos_id = 257;
  c.eot_id = 258;
  return c;
}

TokenizerIR synthetic_byte_tokenizer() {
  TokenizerIR t;
  t.type = TokenizerType::ByteLevelBpe;
  t.pretokenizer = PreTokenizer::None;
  for (int b = 0; b < 256; ++b) {
    t.pieces.push_back(std::string(1, static_cast<char>(b)));
    t.attrs.push_back(TokenAttr::Normal);
  }
  for (const char* s : {"<|bos|>", "<|eos|>", "<|eot|>"}) {
    t.pieces.push_back(s);
    t.attrs.push_back(TokenAttr::Control);
  }
  t.bos_id = 256;
  t.eos_id = 257;
  t.eot_id = 258;
  t.add_bos = true;
  return t;
}

Result<BundleContents> synthetic_contents(const std::string& preset, const ConvertOptions& options) {
  TERN_ASSIGN_OR_RETURN(ModelConfig c, synthetic_config(preset));
  BundleContents out;
  if (options.tokenizer_path.empty()) {
    out.tokenizer = synthetic_byte_tokenizer();
  } else {
    // A real tokenizer on random weights (tests of tokenization and chat formats at a real
    // vocabulary): the vocabulary and special ids follow it.
    TERN_ASSIGN_OR_RETURN(TokenizerIR t, import_tokenizer(options.tokenizer_path));
    c.vocab = static_cast<uint32_t>(t.pieces.size());
    c.bos_id = t.bos_id, c.eos_id = t.eos_id, c.eot_id = t.eot_id;
    out.tokenizer = std::move(t);
  }
  out.config = c;
  out.source_format = "synthetic-" + preset;
  out.source_path = "seed=" + std::to_string(options.seed);
  out.options = describe_options(options);
  const uint64_t seed = options.seed;

  auto dense = [&](const std::string& name, std::vector<uint64_t> shape, bool embedding) {
    TensorSpec s;
    s.name = name;
    s.shape = std::move(shape);
    s.type = TensorType::Dense;
    s.dense_type = embedding ? options.embed_type : DenseType::F32;
    if (s.dense_type == DenseType::Q8 || s.dense_type == DenseType::Q4) s.group = options.embed_group;
    const uint64_t rows = s.rows(), cols = s.cols();
    const DenseType type = s.dense_type;
    const uint32_t group = s.group;
    const uint64_t tseed = tensor_seed(seed, name);
    s.produce = [=](SegmentSink& sink, std::vector<float>& scales) -> Error {
      Rng rng{tseed};
      const uint64_t chunk = std::max<uint64_t>(1, (1u << 18) / cols);
      std::vector<float> buf(chunk * cols);
      for (uint64_t r = 0; r < rows; r += chunk) {
        const uint64_t m = std::min(chunk, rows - r);
        for (uint64_t i = 0; i < m * cols; ++i) {
          // Embeddings ~ U(-0.05, 0.05); norm weights near 1 so activations stay sane.
          buf[i] = embedding ? (rng.uniform() - 0.5f) * 0.1f : 0.9f + 0.2f * rng.uniform();
        }
        TERN_RETURN_IF_ERROR(write_dense_rows(type, group, buf.data(), m, cols, sink, scales));
      }
      return Error::Ok;
    };
    out.tensors.push_back(std::move(s));
  };
  auto ternary = [&](const std::string& name, uint64_t rows, uint64_t cols) {
    TensorSpec s;
    s.name = name;
    s.shape = {rows, cols};
    s.type = TensorType::Ternary;
    s.layout = options.ternary_layout;
    const uint64_t tseed = tensor_seed(seed, name);
    Rng scale_rng{tseed ^ 0x5ca1e};
    // Scales like trained BitNet weights: mean|W| of a few hundredths.
    s.scale = 0.02f + 0.06f * scale_rng.uniform();
    const TernaryLayout layout = s.layout;
    s.produce = [=](SegmentSink& sink, std::vector<float>&) -> Error {
      // One tensor at a time (at most ffn x hidden codes): tiled layouts need whole row blocks.
      Rng rng{tseed};
      std::vector<int8_t> codes(rows * cols);
      uint64_t bits = 0;
      int left = 0;
      for (auto& code : codes) {
        // P(0) = 1/2, P(+1) = P(-1) = 1/4: close to trained BitNet sparsity.
        if (left == 0) bits = rng.next(), left = 32;
        const unsigned v = bits & 3u;
        bits >>= 2, --left;
        code = v == 1 ? 1 : (v == 3 ? -1 : 0);
      }
      std::vector<uint8_t> packed(ternary_packed_size(layout, rows, cols));
      TERN_RETURN_IF_ERROR(ternary_pack(layout, codes.data(), rows, cols, packed.data(), packed.size()));
      return sink.write(packed.data(), packed.size());
    };
    out.tensors.push_back(std::move(s));
  };

  const uint64_t hidden = c.hidden, vocab = c.vocab;
  dense(tensor_names::kTokEmbeddings, {vocab, hidden}, true);
  for (uint32_t l = 0; l < c.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    for (size_t k = 0; k < kLayerTensorCount; ++k) {
      const WeightSpec& spec = kLayerTensors[k];
      if (!tensor_required(spec, c)) continue;
      if (spec.ternary) {
        ternary(p + spec.name, tensor_dim(spec.rows, c), tensor_dim(spec.cols, c));
      } else {
        dense(p + spec.name, {tensor_dim(spec.rows, c)}, false);
      }
    }
  }
  dense(tensor_names::kFinalNorm, {hidden}, false);
  if (!c.tied_embeddings) dense(tensor_names::kLmHead, {vocab, hidden}, true);
  return out;
}

}  // namespace tern::convert
