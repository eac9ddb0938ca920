#include "converter/hf_import.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include "converter/safetensors.h"
#include "converter/tokenizer_import.h"
#include "runtime/model_family.h"
#include "runtime/tensor_names.h"

namespace tern::convert {
namespace fs = std::filesystem;
using nlohmann::json;

float ternarize_absmean(const float* w, size_t n, int8_t* codes) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += std::fabs(w[i]);
  float mean = n ? static_cast<float>(sum / static_cast<double>(n)) : 0.0f;
  if (!(mean >= 1e-5f)) mean = 1e-5f;
  const float s = 1.0f / mean;
  for (size_t i = 0; i < n; ++i) {
    float v = std::nearbyint(w[i] * s);
    if (v > 1.0f) v = 1.0f;
    if (v < -1.0f) v = -1.0f;
    codes[i] = static_cast<int8_t>(v);
  }
  return 1.0f / s;
}

Error unpack_hf_bitnet(const uint8_t* packed, uint64_t out_rows, uint64_t in_cols, int8_t* codes) {
  const uint64_t quarter = out_rows / 4;
  for (uint64_t r = 0; r < quarter; ++r) {
    for (uint64_t c = 0; c < in_cols; ++c) {
      const uint8_t b = packed[r * in_cols + c];
      for (uint64_t i = 0; i < 4; ++i) {
        const unsigned v = (b >> (2 * i)) & 3u;
        if (v == 3) {
          return fail(Error::CorruptFile, "packed value 3 (not ternary) at packed row %llu col %llu",
                      static_cast<unsigned long long>(r), static_cast<unsigned long long>(c));
        }
        codes[(r + i * quarter) * in_cols + c] = static_cast<int8_t>(static_cast<int>(v) - 1);
      }
    }
  }
  return Error::Ok;
}

namespace {

Result<json> read_json(const fs::path& path, bool required) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (required) return fail(Error::FileNotFound, "%s: not found", path.c_str());
    return json();
  }
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return fail(Error::CorruptFile, "%s: not a valid JSON object", path.c_str());
  return j;
}

template <typename T>
Result<T> get_field(const json& j, const char* key, const fs::path& file, const T* fallback) {
  if (!j.contains(key) || j[key].is_null()) {
    if (fallback) return *fallback;
    return fail(Error::CorruptFile, "%s: missing field \"%s\"", file.c_str(), key);
  }
  const json& v = j[key];
  if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) return fail(Error::CorruptFile, "%s: field \"%s\" is not a string", file.c_str(), key);
    return v.get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) return fail(Error::CorruptFile, "%s: field \"%s\" is not a boolean", file.c_str(), key);
    return v.get<bool>();
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) return fail(Error::CorruptFile, "%s: field \"%s\" is not a number", file.c_str(), key);
    return v.get<T>();
  } else {
    if (!v.is_number_integer()) return fail(Error::CorruptFile, "%s: field \"%s\" is not an integer", file.c_str(), key);
    const int64_t x = v.get<int64_t>();
    if (x < 0 || x > (1ll << 24)) {
      return fail(Error::CorruptFile, "%s: field \"%s\" = %lld is out of range", file.c_str(), key,
                  static_cast<long long>(x));
    }
    return static_cast<T>(x);
  }
}

// A token id field that may be an int or a list (generation_config's eos_token_id).
std::vector<int32_t> token_ids(const json& j, const char* key) {
  std::vector<int32_t> ids;
  if (!j.is_object() || !j.contains(key)) return ids;
  const json& v = j[key];
  if (v.is_number_integer()) ids.push_back(v.get<int32_t>());
  if (v.is_array()) {
    for (const auto& x : v) {
      if (x.is_number_integer()) ids.push_back(x.get<int32_t>());
    }
  }
  return ids;
}

enum class Convention { None, Divide, Multiply };

struct Source {
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  std::map<std::string, std::pair<const SafetensorsFile*, const StTensor*>> by_name;
};

Result<Source> open_weights(const fs::path& dir) {
  Source src;
  const fs::path index_path = dir / "model.safetensors.index.json";
  std::vector<std::string> shard_names;
  if (fs::exists(index_path)) {
    TERN_ASSIGN_OR_RETURN(json index, read_json(index_path, true));
    if (!index.contains("weight_map") || !index["weight_map"].is_object()) {
      return fail(Error::CorruptFile, "%s: no \"weight_map\" object", index_path.c_str());
    }
    std::set<std::string> seen;
    for (const auto& [name, file] : index["weight_map"].items()) {
      if (!file.is_string()) return fail(Error::CorruptFile, "%s: weight_map entry '%s' is not a file name", index_path.c_str(), name.c_str());
      const std::string f = file.get<std::string>();
      if (f.find('/') != std::string::npos || f.find("..") != std::string::npos) {
        return fail(Error::CorruptFile, "%s: shard name '%s' is not a plain file name", index_path.c_str(), f.c_str());
      }
      if (seen.insert(f).second) shard_names.push_back(f);
    }
  } else {
    shard_names.push_back("model.safetensors");
  }
  for (const auto& name : shard_names) {
    const fs::path p = dir / name;
    if (!fs::exists(p)) return fail(Error::FileNotFound, "%s: not found", p.c_str());
    TERN_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(p.string()));
    src.files.push_back(std::make_unique<SafetensorsFile>(std::move(f)));
    const SafetensorsFile* fp = src.files.back().get();
    for (const auto& [tname, t] : fp->tensors()) {
      if (!src.by_name.emplace(tname, std::make_pair(fp, &t)).second) {
        return fail(Error::CorruptFile, "%s: tensor '%s' appears in more than one shard", p.c_str(), tname.c_str());
      }
    }
  }
  return src;
}

struct Importer {
  fs::path dir;
  const Source& src;
  Convention convention;
  bool any_packed = false;
  std::string master_dtype;

  std::string where() const { return dir.string(); }

  Result<std::pair<const SafetensorsFile*, const StTensor*>> get(const std::string& name) const {
    auto it = src.by_name.find(name);
    if (it == src.by_name.end()) {
      return fail(Error::UnknownTensor, "%s: missing tensor '%s'", where().c_str(), name.c_str());
    }
    return it->second;
  }

  static std::string shape_str(const std::vector<uint64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
  }

  Result<TensorIR> load_float(const std::string& hf, const std::string& canon, std::vector<uint64_t> shape) {
    TERN_ASSIGN_OR_RETURN(auto ft, get(hf));
    const SafetensorsFile* file = ft.first;
    const StTensor* t = ft.second;
    if (t->shape != shape) {
      return fail(Error::ShapeMismatch, "%s: tensor '%s' has shape %s, the config needs %s", file->path().c_str(),
                  hf.c_str(), shape_str(t->shape).c_str(), shape_str(shape).c_str());
    }
    TensorIR ir;
    ir.name = canon;
    ir.shape = std::move(shape);
    ir.kind = TensorKind::Float;
    ir.source = file->path() + ":" + hf;
    TERN_ASSIGN_OR_RETURN(ir.values, file->read_float(*t));
    return ir;
  }

  Result<TensorIR> load_ternary(const std::string& hf_base, const std::string& canon, uint64_t out, uint64_t in) {
    const std::string hf = hf_base + ".weight";
    TERN_ASSIGN_OR_RETURN(auto ft, get(hf));
    const SafetensorsFile* file = ft.first;
    const StTensor* t = ft.second;
    TensorIR ir;
    ir.name = canon;
    ir.shape = {out, in};
    ir.kind = TensorKind::Ternary;
    ir.source = file->path() + ":" + hf;
    ir.codes.resize(out * in);
    if (t->dtype == StDtype::U8) {
      if (convention == Convention::None) {
        return fail(Error::NotSupported,
                    "%s: tensor '%s' is packed uint8 but config.json has no bitnet quantization_config", file->path().c_str(),
                    hf.c_str());
      }
      if (out % 4 != 0 || t->shape != std::vector<uint64_t>{out / 4, in}) {
        return fail(Error::ShapeMismatch, "%s: packed tensor '%s' has shape %s, the config needs %s", file->path().c_str(),
                    hf.c_str(), shape_str(t->shape).c_str(), shape_str({out / 4, in}).c_str());
      }
      if (Error e = unpack_hf_bitnet(t->data, out, in, ir.codes.data()); e != Error::Ok) {
        return fail(e, "%s: tensor '%s': %s", file->path().c_str(), hf.c_str(), last_error_message());
      }
      TERN_ASSIGN_OR_RETURN(auto fs_, get(hf_base + ".weight_scale"));
      TERN_ASSIGN_OR_RETURN(std::vector<float> s, fs_.first->read_float(*fs_.second));
      if (s.size() != 1) {
        return fail(Error::ShapeMismatch, "%s: '%s.weight_scale' has %zu values, expected one per tensor",
                    fs_.first->path().c_str(), hf_base.c_str(), s.size());
      }
      if (!std::isfinite(s[0]) || s[0] <= 0.0f) {
        return fail(Error::CorruptFile, "%s: '%s.weight_scale' = %g is not a positive number", fs_.first->path().c_str(),
                    hf_base.c_str(), static_cast<double>(s[0]));
      }
      ir.scale = convention == Convention::Divide ? 1.0f / s[0] : s[0];
      any_packed = true;
      return ir;
    }
    if (t->shape != std::vector<uint64_t>{out, in}) {
      return fail(Error::ShapeMismatch, "%s: tensor '%s' has shape %s, the config needs %s", file->path().c_str(),
                  hf.c_str(), shape_str(t->shape).c_str(), shape_str({out, in}).c_str());
    }
    if (t->dtype == StDtype::I8) {
      return fail(Error::UnsupportedType, "%s: tensor '%s' has dtype I8, not a weight encoding Tern knows",
                  file->path().c_str(), hf.c_str());
    }
    TERN_ASSIGN_OR_RETURN(std::vector<float> w, file->read_float(*t));
    ir.scale = ternarize_absmean(w.data(), w.size(), ir.codes.data());
    master_dtype = to_string(t->dtype);
    return ir;
  }
};

}  // namespace

Result<ModelIR> import_hf(const std::string& dir_str, const ConvertOptions& options) {
  const fs::path dir(dir_str);
  const fs::path config_path = dir / "config.json";
  TERN_ASSIGN_OR_RETURN(json cj, read_json(config_path, true));
  const char* cp = config_path.c_str();

  std::string arch;
  if (cj.contains("architectures") && cj["architectures"].is_array() && !cj["architectures"].empty() &&
      cj["architectures"][0].is_string()) {
    arch = cj["architectures"][0].get<std::string>();
  }
  ModelIR ir;
  ModelConfig& c = ir.config;
  if (arch == "BitNetForCausalLM") {
    c.family = ModelFamily::Bitnet2B4T;
  } else if (arch == "BitnetForCausalLM" || arch == "LlamaForCausalLM") {
    c.family = ModelFamily::LlamaBitnet;
  } else {
    return fail(Error::UnsupportedModel, "%s: unsupported architecture '%s' (expected BitNetForCausalLM, "
                "BitnetForCausalLM or LlamaForCausalLM)", cp, arch.c_str());
  }
  const bool is_2b4t = c.family == ModelFamily::Bitnet2B4T;

  TERN_ASSIGN_OR_RETURN(c.hidden, get_field<uint32_t>(cj, "hidden_size", config_path, nullptr));
  TERN_ASSIGN_OR_RETURN(c.ffn_hidden, get_field<uint32_t>(cj, "intermediate_size", config_path, nullptr));
  TERN_ASSIGN_OR_RETURN(c.layers, get_field<uint32_t>(cj, "num_hidden_layers", config_path, nullptr));
  TERN_ASSIGN_OR_RETURN(c.heads, get_field<uint32_t>(cj, "num_attention_heads", config_path, nullptr));
  TERN_ASSIGN_OR_RETURN(c.kv_heads, get_field<uint32_t>(cj, "num_key_value_heads", config_path, &c.heads));
  TERN_ASSIGN_OR_RETURN(c.vocab, get_field<uint32_t>(cj, "vocab_size", config_path, nullptr));
  if (c.hidden == 0 || c.heads == 0 || c.kv_heads == 0 || c.layers == 0 || c.vocab == 0 || c.ffn_hidden == 0 ||
      c.heads % c.kv_heads != 0) {
    return fail(Error::CorruptFile, "%s: inconsistent dimensions (hidden %u, heads %u, kv heads %u, layers %u)", cp,
                c.hidden, c.heads, c.kv_heads, c.layers);
  }
  const uint32_t default_head_dim = c.hidden / c.heads;
  TERN_ASSIGN_OR_RETURN(c.head_dim, get_field<uint32_t>(cj, "head_dim", config_path, &default_head_dim));
  const uint32_t default_ctx = 2048;
  TERN_ASSIGN_OR_RETURN(c.max_context, get_field<uint32_t>(cj, "max_position_embeddings", config_path, &default_ctx));
  const float default_theta = 10000.0f, default_eps = is_2b4t ? 1e-5f : 1e-6f;
  TERN_ASSIGN_OR_RETURN(c.rope_theta, get_field<float>(cj, "rope_theta", config_path, &default_theta));
  TERN_ASSIGN_OR_RETURN(c.norm_eps, get_field<float>(cj, "rms_norm_eps", config_path, &default_eps));
  const bool default_tied = is_2b4t;
  TERN_ASSIGN_OR_RETURN(c.tied_embeddings, get_field<bool>(cj, "tie_word_embeddings", config_path, &default_tied));
  const std::string default_act = is_2b4t ? "relu2" : "silu";
  TERN_ASSIGN_OR_RETURN(std::string act, get_field<std::string>(cj, "hidden_act", config_path, &default_act));
  if (act == "relu2") {
    c.activation = Activation::Relu2;
  } else if (act == "silu") {
    c.activation = Activation::Silu;
  } else {
    return fail(Error::UnsupportedModel, "%s: unsupported hidden_act '%s' (relu2 or silu)", cp, act.c_str());
  }
  c.rope_style = RopeStyle::RotateHalf;
  c.has_sub_norms = is_2b4t;
  if (cj.contains("rope_scaling") && !cj["rope_scaling"].is_null()) {
    return fail(Error::NotSupported, "%s: rope_scaling is not supported", cp);
  }

  Convention convention = Convention::None;
  if (cj.contains("quantization_config") && !cj["quantization_config"].is_null()) {
    const json& q = cj["quantization_config"];
    const std::string method = q.is_object() && q.contains("quant_method") && q["quant_method"].is_string()
                                   ? q["quant_method"].get<std::string>() : "";
    const std::string cls = q.is_object() && q.contains("linear_class") && q["linear_class"].is_string()
                                ? q["linear_class"].get<std::string>() : "";
    const std::string mode = q.is_object() && q.contains("quantization_mode") && q["quantization_mode"].is_string()
                                 ? q["quantization_mode"].get<std::string>() : "offline";
    if (method != "bitnet") {
      return fail(Error::NotSupported, "%s: unsupported quantization_config.quant_method '%s' (only 'bitnet')", cp,
                  method.c_str());
    }
    if (cls == "bitlinear") {
      convention = Convention::Divide;
    } else if (cls == "autobitlinear") {
      convention = Convention::Multiply;
    } else {
      return fail(Error::NotSupported,
                  "%s: unsupported quantization_config.linear_class '%s' (bitlinear or autobitlinear)", cp, cls.c_str());
    }
    if (mode != "offline" && mode != "online") {
      return fail(Error::NotSupported, "%s: unsupported quantization_config.quantization_mode '%s'", cp, mode.c_str());
    }
  }

  TERN_ASSIGN_OR_RETURN(json gen, read_json(dir / "generation_config.json", false));
  auto bos = token_ids(cj, "bos_token_id"), eos = token_ids(cj, "eos_token_id");
  const auto gen_bos = token_ids(gen, "bos_token_id"), gen_eos = token_ids(gen, "eos_token_id");
  if (!gen_bos.empty()) bos = gen_bos;
  if (!eos.empty() || !gen_eos.empty()) {
    if (eos.empty()) eos = gen_eos;
    for (int32_t id : gen_eos) {
      if (id != eos[0]) c.eot_id = id;  // generation stops at the end-of-turn token too
    }
  }
  if (!bos.empty()) c.bos_id = bos[0];
  if (!eos.empty()) c.eos_id = eos[0];

  TERN_ASSIGN_OR_RETURN(Source src, open_weights(dir));
  Importer im{dir, src, convention, false, {}};

  const uint64_t hidden = c.hidden, vocab = c.vocab;
  {
    TERN_ASSIGN_OR_RETURN(TensorIR t, im.load_float(global_tensor(tensor_names::kTokEmbeddings).hf, tensor_names::kTokEmbeddings, {vocab, hidden}));
    ir.tensors.push_back(std::move(t));
  }
  for (uint32_t l = 0; l < c.layers; ++l) {
    const std::string hf = "model.layers." + std::to_string(l) + ".";
    const std::string tn = "layers." + std::to_string(l) + ".";
    // Norms first, then the ternary matrices (the order bundles have always been written in).
    for (size_t k = 0; k < kLayerTensorCount; ++k) {
      const WeightSpec& spec = kLayerTensors[k];
      if (spec.ternary || !tensor_required(spec, c)) continue;
      TERN_ASSIGN_OR_RETURN(TensorIR t, im.load_float(hf + spec.hf, tn + spec.name, {tensor_dim(spec.rows, c)}));
      ir.tensors.push_back(std::move(t));
    }
    for (size_t k = 0; k < kLayerTensorCount; ++k) {
      const WeightSpec& spec = kLayerTensors[k];
      if (!spec.ternary) continue;
      TERN_ASSIGN_OR_RETURN(TensorIR t, im.load_ternary(hf + spec.hf, tn + spec.name, tensor_dim(spec.rows, c),
                                                        tensor_dim(spec.cols, c)));
      ir.tensors.push_back(std::move(t));
    }
    if (options.on_progress) options.on_progress("importing", l + 1, c.layers);
  }
  {
    TERN_ASSIGN_OR_RETURN(TensorIR t, im.load_float(global_tensor(tensor_names::kFinalNorm).hf, tensor_names::kFinalNorm, {hidden}));
    ir.tensors.push_back(std::move(t));
  }
  if (!c.tied_embeddings) {
    TERN_ASSIGN_OR_RETURN(TensorIR t, im.load_float(global_tensor(tensor_names::kLmHead).hf, tensor_names::kLmHead, {vocab, hidden}));
    ir.tensors.push_back(std::move(t));
  }

  ir.source_format = im.any_packed ? "hf-safetensors-packed"
                                   : "hf-safetensors-" + (im.master_dtype.empty() ? std::string("master") : im.master_dtype);
  for (auto& ch : ir.source_format) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  ir.source_path = dir_str;

  const std::string tok_path = options.tokenizer_path.empty() ? dir_str : options.tokenizer_path;
  TERN_ASSIGN_OR_RETURN(const bool has_tokenizer,
                        import_checkpoint_tokenizer(tok_path, options, dir_str, &ir.tokenizer));
  if (has_tokenizer) {
    if (c.bos_id < 0) c.bos_id = ir.tokenizer.bos_id;
    if (c.eos_id < 0) c.eos_id = ir.tokenizer.eos_id;
    if (c.eot_id < 0) c.eot_id = ir.tokenizer.eot_id;
  }
  return ir;
}

}  // namespace tern::convert
