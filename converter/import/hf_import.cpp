#include "converter/import/hf_import.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "converter/import/safetensors.h"
#include "converter/tokenizer/tokenizer_import.h"
#include "platform/file_map.h"
#include "runtime/model/model_family.h"
#include "runtime/model/tensor_names.h"

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
  std::error_code ec;
  if (!required && !fs::exists(path, ec)) return json();
  TERN_ASSIGN_OR_RETURN(const std::string text, read_whole_file(path.c_str()));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
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
    if (!v.is_number_integer())
      return fail(Error::CorruptFile, "%s: field \"%s\" is not an integer", file.c_str(), key);
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
      if (!file.is_string())
        return fail(Error::CorruptFile, "%s: weight_map entry '%s' is not a file name", index_path.c_str(),
                    name.c_str());
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
                    "%s: tensor '%s' is packed uint8 but config.json has no bitnet quantization_config",
                    file->path().c_str(), hf.c_str());
      }
      if (out % 4 != 0 || t->shape != std::vector<uint64_t>{out / 4, in}) {
        return fail(Error::ShapeMismatch, "%s: packed tensor '%s' has shape %s, the config needs %s",
                    file->path().c_str(), hf.c_str(), shape_str(t->shape).c_str(), shape_str({out / 4, in}).c_str());
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
        return fail(Error::CorruptFile, "%s: '%s.weight_scale' = %g is not a positive number",
                    fs_.first->path().c_str(), hf_base.c_str(), static_cast<double>(s[0]));
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

// A number field read from `j`, or `fallback` when absent or null.
Result<float> number_or(const json& j, const char* key, const fs::path& file, float fallback) {
  return get_field<float>(j, key, file, &fallback);
}

// The RoPE bases of a transformers 5 "rope_parameters" entry (a flat one, or per layer type).
Result<float> rope_parameter(const json& params, const char* layer_type, const fs::path& file, float fallback) {
  const json* entry = &params;
  if (layer_type != nullptr && params.contains(layer_type)) entry = &params[layer_type];
  if (!entry->is_object()) return fallback;
  if (entry->contains("rope_type") && (*entry)["rope_type"] != "default") {
    return fail(Error::NotSupported, "%s: rope_parameters%s%s rope_type %s is not supported (only \"default\")",
                file.c_str(), layer_type ? "." : "", layer_type ? layer_type : "",
                (*entry)["rope_type"].dump().c_str());
  }
  return number_or(*entry, "rope_theta", file, fallback);
}

// Qwen3 / Gemma3 fields beyond the common ones: sliding windows and which layers use them,
// the RoPE bases, Gemma's attention scale and embedding scale. What they declare that the
// forward pass does not compute is refused, naming the field.
Error read_embedding_family_config(const json& cj, const fs::path& path, ModelConfig* c) {
  const char* cp = path.c_str();
  const bool gemma = c->family == ModelFamily::Gemma3Bitnet;
  c->embedding = true;
  c->pooling = Pooling::Last;  // BitNet-embedding: last-token pooling, L2-normalized
  c->embedding_normalize = true;
  if (cj.contains("attention_bias") && cj["attention_bias"] != false) {
    return fail(Error::NotSupported, "%s: attention_bias is not supported (BitNet projections have no bias)", cp);
  }
  for (const char* key : {"attn_logit_softcapping"}) {
    if (cj.contains(key) && !cj[key].is_null()) return fail(Error::NotSupported, "%s: %s is not supported", cp, key);
  }
  if (cj.contains("use_bidirectional_attention") && cj["use_bidirectional_attention"] == true) {
    return fail(Error::NotSupported, "%s: use_bidirectional_attention is not supported (Tern attends causally)", cp);
  }
  const float default_theta = 1000000.0f, default_local = 10000.0f;
  const json params =
      cj.contains("rope_parameters") && cj["rope_parameters"].is_object() ? cj["rope_parameters"] : json();
  TERN_ASSIGN_OR_RETURN(c->rope_theta, number_or(cj, "rope_theta", path, default_theta));
  if (params.is_object()) {
    TERN_ASSIGN_OR_RETURN(c->rope_theta,
                          rope_parameter(params, gemma ? "full_attention" : nullptr, path, c->rope_theta));
  }
  if (gemma) {
    TERN_ASSIGN_OR_RETURN(c->rope_local_theta, number_or(cj, "rope_local_base_freq", path, default_local));
    if (params.is_object()) {
      TERN_ASSIGN_OR_RETURN(c->rope_local_theta,
                            rope_parameter(params, "sliding_attention", path, c->rope_local_theta));
    }
    TERN_ASSIGN_OR_RETURN(const float scalar, number_or(cj, "query_pre_attn_scalar", path, 256.0f));
    if (!(scalar > 0.0f)) return fail(Error::CorruptFile, "%s: query_pre_attn_scalar %g is not positive", cp, scalar);
    c->attention_scale = 1.0f / std::sqrt(scalar);
    c->embedding_scale = std::sqrt(static_cast<float>(c->hidden));
  }

  // Which layers slide: layer_types when given, else each family's own rule.
  uint32_t window = 0;
  if (cj.contains("sliding_window") && !cj["sliding_window"].is_null()) {
    TERN_ASSIGN_OR_RETURN(window, get_field<uint32_t>(cj, "sliding_window", path, nullptr));
  }
  std::vector<bool> sliding(c->layers, false);
  if (cj.contains("layer_types") && !cj["layer_types"].is_null()) {
    const json& types = cj["layer_types"];
    if (!types.is_array() || types.size() != c->layers) {
      return fail(Error::CorruptFile, "%s: layer_types needs one entry per layer (%u)", cp, c->layers);
    }
    for (uint32_t l = 0; l < c->layers; ++l) {
      if (types[l] == "sliding_attention") {
        sliding[l] = true;
      } else if (types[l] != "full_attention") {
        return fail(Error::NotSupported,
                    "%s: layer_types[%u] = %s is not supported (full_attention or "
                    "sliding_attention)",
                    cp, l, types[l].dump().c_str());
      }
    }
  } else if (gemma) {
    const uint32_t default_pattern = 6;
    const char* key = cj.contains("sliding_window_pattern") ? "sliding_window_pattern" : "_sliding_window_pattern";
    TERN_ASSIGN_OR_RETURN(const uint32_t pattern, get_field<uint32_t>(cj, key, path, &default_pattern));
    for (uint32_t l = 0; l < c->layers; ++l) sliding[l] = pattern == 0 || (l + 1) % pattern != 0;
  } else {
    const bool off = false;
    TERN_ASSIGN_OR_RETURN(const bool use, get_field<bool>(cj, "use_sliding_window", path, &off));
    const uint32_t none = c->layers;
    TERN_ASSIGN_OR_RETURN(const uint32_t from, get_field<uint32_t>(cj, "max_window_layers", path, &none));
    for (uint32_t l = 0; l < c->layers; ++l) sliding[l] = use && l >= from;
  }
  if (!gemma && cj.contains("use_sliding_window") && cj["use_sliding_window"] == false) {
    sliding.assign(c->layers, false);  // Qwen3 ignores layer_types' sliding entries without it
  }
  for (uint32_t l = 0; l < c->layers; ++l) {
    if (!sliding[l]) continue;
    if (window == 0) return fail(Error::CorruptFile, "%s: layer %u slides but sliding_window is not set", cp, l);
    if (l >= 64)
      return fail(Error::NotSupported, "%s: layer_types: sliding layer %u (at most 64 layers may slide)", cp, l);
    c->sliding_layers |= uint64_t{1} << l;
  }
  c->sliding_window = c->sliding_layers != 0 ? window : 0;
  return Error::Ok;
}

// The sentence-transformers files beside an embedding model: the pooling (modules.json and
// its Pooling module's config), whether a Normalize module follows, the prompts
// (config_sentence_transformers.json), and the token the tokenizer puts after every text.
Error read_sentence_transformers(const fs::path& dir, bool has_tokenizer, ModelIR* ir) {
  ModelConfig& c = ir->config;
  const fs::path modules_path = dir / "modules.json";
  std::error_code ec;
  if (fs::exists(modules_path, ec)) {
    TERN_ASSIGN_OR_RETURN(const std::string text, read_whole_file(modules_path.c_str()));
    json modules = json::parse(text, nullptr, false);
    if (modules.is_discarded() || !modules.is_array()) {
      return fail(Error::CorruptFile, "%s: not a JSON list of modules", modules_path.c_str());
    }
    c.embedding_normalize = false;
    for (const json& m : modules) {
      const std::string type =
          m.is_object() && m.contains("type") && m["type"].is_string() ? m["type"].get<std::string>() : "";
      const std::string sub =
          m.is_object() && m.contains("path") && m["path"].is_string() ? m["path"].get<std::string>() : "";
      auto ends = [&](const char* tail) {
        const size_t n = std::strlen(tail);
        return type.size() >= n && type.compare(type.size() - n, n, tail) == 0;
      };
      if (ends("Transformer")) continue;
      if (ends("Normalize")) {
        c.embedding_normalize = true;
        continue;
      }
      if (!ends("Pooling")) {
        return fail(Error::NotSupported, "%s: module '%s' is not supported (Transformer, Pooling and Normalize are)",
                    modules_path.c_str(), type.c_str());
      }
      if (sub.find("..") != std::string::npos) {
        return fail(Error::CorruptFile, "%s: module path '%s' leaves the model directory", modules_path.c_str(),
                    sub.c_str());
      }
      const fs::path pooling_path = dir / sub / "config.json";
      TERN_ASSIGN_OR_RETURN(json pooling, read_json(pooling_path, true));
      const char* modes[] = {
          "pooling_mode_lasttoken",  "pooling_mode_mean_tokens",          "pooling_mode_cls_token",
          "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens"};
      int chosen = -1;
      for (int k = 0; k < 6; ++k) {
        if (pooling.contains(modes[k]) && pooling[modes[k]] == true) {
          if (chosen >= 0 || k >= 3) {
            return fail(Error::NotSupported,
                        "%s: %s is not supported (one of pooling_mode_lasttoken, "
                        "pooling_mode_mean_tokens, pooling_mode_cls_token)",
                        pooling_path.c_str(), modes[k]);
          }
          chosen = k;
        }
      }
      if (chosen < 0) return fail(Error::CorruptFile, "%s: no pooling mode is set", pooling_path.c_str());
      c.pooling = chosen == 0 ? Pooling::Last : chosen == 1 ? Pooling::Mean : Pooling::First;
      if (c.pooling == Pooling::Mean && pooling.contains("include_prompt") && pooling["include_prompt"] == false) {
        return fail(Error::NotSupported, "%s: include_prompt false is not supported (prompts are pooled)",
                    pooling_path.c_str());
      }
    }
  }
  TERN_ASSIGN_OR_RETURN(json st, read_json(dir / "config_sentence_transformers.json", false));
  if (st.is_object() && st.contains("prompts") && st["prompts"].is_object()) {
    for (const auto& [name, text] : st["prompts"].items()) {
      if (!text.is_string()) continue;
      ir->embedding.prompts.emplace_back(name, text.get<std::string>());
    }
  }
  if (st.is_object() && st.contains("default_prompt_name") && st["default_prompt_name"].is_string()) {
    ir->embedding.default_prompt = st["default_prompt_name"].get<std::string>();
  }
  if (!has_tokenizer) return Error::Ok;
  // The token after every text: the tokenizer's own template, tokenizer_config's
  // add_eos_token, or for Qwen3 <|endoftext|> (what bitnet.cpp's converter appends for
  // last-token pooling).
  TokenizerIR& tok = ir->tokenizer;
  if (tok.template_eos_id >= 0) {
    tok.eos_id = tok.template_eos_id;
    c.embedding_append_eos = true;
  } else if (tok.add_eos && tok.eos_id >= 0) {
    c.embedding_append_eos = true;
  } else if (c.family == ModelFamily::Qwen3Bitnet) {
    for (size_t i = 0; i < tok.pieces.size(); ++i) {
      if (tok.pieces[i] == "<|endoftext|>") {
        tok.eos_id = static_cast<int32_t>(i);
        c.embedding_append_eos = true;
      }
    }
    if (!c.embedding_append_eos) {
      return fail(Error::CorruptFile, "%s: a Qwen3 embedding tokenizer needs <|endoftext|> for last-token pooling",
                  dir.c_str());
    }
  }
  c.eos_id = tok.eos_id;
  return Error::Ok;
}

// Qwen3 and Gemma3 BitNet checkpoints: embedding models, with their own config fields and files.
bool is_embedding_family(ModelFamily family) {
  return family == ModelFamily::Qwen3Bitnet || family == ModelFamily::Gemma3Bitnet;
}

// The model family config.json names (architectures, else model_type). Qwen3 and Gemma3 are
// embedding models only.
Error read_family(const json& cj, const char* cp, ModelConfig* c) {
  std::string arch;
  if (cj.contains("architectures") && cj["architectures"].is_array() && !cj["architectures"].empty() &&
      cj["architectures"][0].is_string()) {
    arch = cj["architectures"][0].get<std::string>();
  }
  const std::string model_type =
      cj.contains("model_type") && cj["model_type"].is_string() ? cj["model_type"].get<std::string>() : "";
  if (arch == "BitNetForCausalLM") {
    c->family = ModelFamily::Bitnet2B4T;
  } else if (arch == "BitnetForCausalLM" || arch == "LlamaForCausalLM") {
    c->family = ModelFamily::LlamaBitnet;
  } else if (model_type == "qwen3" || arch == "Qwen3Model") {
    c->family = ModelFamily::Qwen3Bitnet;
  } else if (model_type == "gemma3_text" || arch == "Gemma3TextModel") {
    c->family = ModelFamily::Gemma3Bitnet;
  } else {
    return fail(Error::UnsupportedModel,
                "%s: unsupported architecture '%s' (expected BitNetForCausalLM, "
                "BitnetForCausalLM, LlamaForCausalLM, or a BitNet embedding model: model_type qwen3 or gemma3_text)",
                cp, arch.empty() ? model_type.c_str() : arch.c_str());
  }
  if (is_embedding_family(c->family) && arch.size() > 9 && arch.compare(arch.size() - 9, 9, "ForCausalLM") == 0) {
    return fail(Error::UnsupportedModel,
                "%s: %s is a text generator; Tern runs Qwen3 and Gemma3 BitNet models as "
                "embedding models only (architectures Qwen3Model / Gemma3TextModel)",
                cp, arch.c_str());
  }
  return Error::Ok;
}

// The shapes, RoPE, norms and activation of config.json, with each family's defaults.
Error read_dimensions(const json& cj, const fs::path& config_path, ModelConfig* c) {
  const char* cp = config_path.c_str();
  const bool is_2b4t = c->family == ModelFamily::Bitnet2B4T;
  TERN_ASSIGN_OR_RETURN(c->hidden, get_field<uint32_t>(cj, "hidden_size", config_path, nullptr));
  TERN_ASSIGN_OR_RETURN(c->ffn_hidden, get_field<uint32_t>(cj, "intermediate_size", config_path, nullptr));
  TERN_ASSIGN_OR_RETURN(c->layers, get_field<uint32_t>(cj, "num_hidden_layers", config_path, nullptr));
  TERN_ASSIGN_OR_RETURN(c->heads, get_field<uint32_t>(cj, "num_attention_heads", config_path, nullptr));
  TERN_ASSIGN_OR_RETURN(c->kv_heads, get_field<uint32_t>(cj, "num_key_value_heads", config_path, &c->heads));
  TERN_ASSIGN_OR_RETURN(c->vocab, get_field<uint32_t>(cj, "vocab_size", config_path, nullptr));
  if (c->hidden == 0 || c->heads == 0 || c->kv_heads == 0 || c->layers == 0 || c->vocab == 0 || c->ffn_hidden == 0 ||
      c->heads % c->kv_heads != 0) {
    return fail(Error::CorruptFile, "%s: inconsistent dimensions (hidden %u, heads %u, kv heads %u, layers %u)", cp,
                c->hidden, c->heads, c->kv_heads, c->layers);
  }
  const uint32_t default_head_dim = c->hidden / c->heads;
  TERN_ASSIGN_OR_RETURN(c->head_dim, get_field<uint32_t>(cj, "head_dim", config_path, &default_head_dim));
  const uint32_t default_ctx = 2048;
  TERN_ASSIGN_OR_RETURN(c->max_context, get_field<uint32_t>(cj, "max_position_embeddings", config_path, &default_ctx));
  const float default_theta = 10000.0f, default_eps = is_2b4t ? 1e-5f : 1e-6f;
  TERN_ASSIGN_OR_RETURN(c->rope_theta, get_field<float>(cj, "rope_theta", config_path, &default_theta));
  TERN_ASSIGN_OR_RETURN(c->norm_eps, get_field<float>(cj, "rms_norm_eps", config_path, &default_eps));
  const bool default_tied = is_2b4t;
  TERN_ASSIGN_OR_RETURN(c->tied_embeddings, get_field<bool>(cj, "tie_word_embeddings", config_path, &default_tied));
  const bool gemma = c->family == ModelFamily::Gemma3Bitnet;
  const std::string default_act = is_2b4t ? "relu2" : gemma ? "gelu_pytorch_tanh" : "silu";
  const char* act_key = gemma && cj.contains("hidden_activation") ? "hidden_activation" : "hidden_act";
  TERN_ASSIGN_OR_RETURN(std::string act, get_field<std::string>(cj, act_key, config_path, &default_act));
  if (act == "relu2") {
    c->activation = Activation::Relu2;
  } else if (act == "silu") {
    c->activation = Activation::Silu;
  } else if (act == "gelu_pytorch_tanh") {
    c->activation = Activation::GeluTanh;
  } else {
    return fail(Error::UnsupportedModel, "%s: unsupported %s '%s' (relu2, silu or gelu_pytorch_tanh)", cp, act_key,
                act.c_str());
  }
  c->rope_style = RopeStyle::RotateHalf;
  c->has_sub_norms = is_2b4t || is_embedding_family(c->family);  // the embedding families' o_proj / down_proj norms
  if (cj.contains("rope_scaling") && !cj["rope_scaling"].is_null()) {
    return fail(Error::NotSupported, "%s: rope_scaling is not supported", cp);
  }
  return Error::Ok;
}

// How packed weights' scales are meant (config.json's bitnet quantization_config), None without one.
Result<Convention> read_convention(const json& cj, const char* cp) {
  Convention convention = Convention::None;
  if (cj.contains("quantization_config") && !cj["quantization_config"].is_null()) {
    const json& q = cj["quantization_config"];
    const std::string method = q.is_object() && q.contains("quant_method") && q["quant_method"].is_string()
                                   ? q["quant_method"].get<std::string>()
                                   : "";
    const std::string cls = q.is_object() && q.contains("linear_class") && q["linear_class"].is_string()
                                ? q["linear_class"].get<std::string>()
                                : "";
    const std::string mode = q.is_object() && q.contains("quantization_mode") && q["quantization_mode"].is_string()
                                 ? q["quantization_mode"].get<std::string>()
                                 : "offline";
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
                  "%s: unsupported quantization_config.linear_class '%s' (bitlinear or autobitlinear)", cp,
                  cls.c_str());
    }
    if (mode != "offline" && mode != "online") {
      return fail(Error::NotSupported, "%s: unsupported quantization_config.quantization_mode '%s'", cp, mode.c_str());
    }
  }
  return convention;
}

// BOS, EOS and end-of-turn ids from config.json and generation_config.json.
Error read_special_tokens(const json& cj, const fs::path& dir, ModelConfig* c) {
  TERN_ASSIGN_OR_RETURN(json gen, read_json(dir / "generation_config.json", false));
  auto bos = token_ids(cj, "bos_token_id"), eos = token_ids(cj, "eos_token_id");
  const auto gen_bos = token_ids(gen, "bos_token_id"), gen_eos = token_ids(gen, "eos_token_id");
  if (!gen_bos.empty()) bos = gen_bos;
  if (!eos.empty() || !gen_eos.empty()) {
    if (eos.empty()) eos = gen_eos;
    for (int32_t id : gen_eos) {
      if (id != eos[0]) c->eot_id = id;  // generation stops at the end-of-turn token too
    }
  }
  if (!bos.empty()) c->bos_id = bos[0];
  if (!eos.empty()) c->eos_id = eos[0];
  return Error::Ok;
}

// Every tensor from the safetensors shards into ir->tensors, in the bundle's order, and the
// source format they were stored in.
Error import_weights(const fs::path& dir, Convention convention, const ConvertOptions& options, ModelIR* ir) {
  ModelConfig& c = ir->config;
  TERN_ASSIGN_OR_RETURN(Source src, open_weights(dir));
  Importer im{dir, src, convention, false, {}};
  // Sentence-transformers save the bare model: "layers.0...." instead of "model.layers.0....".
  const bool bare = is_embedding_family(c.family) && src.by_name.count("model.embed_tokens.weight") == 0 &&
                    src.by_name.count("embed_tokens.weight") != 0;
  auto model_name = [&](const std::string& name) {
    return bare && name.compare(0, 6, "model.") == 0 ? name.substr(6) : name;
  };
  // Gemma keeps its own norms as w in x * (1 + w); the bundle stores the factor.
  const bool plus_one = family_traits(c.family)->hf_norms_plus_one;
  auto add_one = [&](TensorIR& t) {
    for (float& v : t.values) v += 1.0f;
  };

  const uint64_t hidden = c.hidden, vocab = c.vocab;
  {
    TERN_ASSIGN_OR_RETURN(TensorIR t, im.load_float(model_name(global_tensor(tensor_names::kTokEmbeddings).hf),
                                                    tensor_names::kTokEmbeddings, {vocab, hidden}));
    ir->tensors.push_back(std::move(t));
  }
  for (uint32_t l = 0; l < c.layers; ++l) {
    const std::string hf = model_name("model.layers." + std::to_string(l) + ".");
    const std::string tn = "layers." + std::to_string(l) + ".";
    // Norms first, then the ternary matrices (the order bundles have always been written in).
    for (size_t k = 0; k < kLayerTensorCount; ++k) {
      const WeightSpec& spec = kLayerTensors[k];
      if (spec.ternary || !tensor_required(spec, c)) continue;
      TERN_ASSIGN_OR_RETURN(
          TensorIR t, im.load_float(hf + hf_tensor_name(spec, c.family), tn + spec.name, {tensor_dim(spec.rows, c)}));
      if (plus_one && !spec.linear_input_norm) add_one(t);
      ir->tensors.push_back(std::move(t));
    }
    for (size_t k = 0; k < kLayerTensorCount; ++k) {
      const WeightSpec& spec = kLayerTensors[k];
      if (!spec.ternary) continue;
      TERN_ASSIGN_OR_RETURN(TensorIR t, im.load_ternary(hf + hf_tensor_name(spec, c.family), tn + spec.name,
                                                        tensor_dim(spec.rows, c), tensor_dim(spec.cols, c)));
      ir->tensors.push_back(std::move(t));
    }
    if (options.on_progress) options.on_progress("importing", l + 1, c.layers);
  }
  {
    TERN_ASSIGN_OR_RETURN(TensorIR t, im.load_float(model_name(global_tensor(tensor_names::kFinalNorm).hf),
                                                    tensor_names::kFinalNorm, {hidden}));
    if (plus_one) add_one(t);
    ir->tensors.push_back(std::move(t));
  }
  if (!c.tied_embeddings && !c.embedding) {
    TERN_ASSIGN_OR_RETURN(
        TensorIR t, im.load_float(global_tensor(tensor_names::kLmHead).hf, tensor_names::kLmHead, {vocab, hidden}));
    ir->tensors.push_back(std::move(t));
  }
  if (c.embedding) c.tied_embeddings = true;  // no lm_head: nothing reads one

  ir->source_format = im.any_packed
                          ? "hf-safetensors-packed"
                          : "hf-safetensors-" + (im.master_dtype.empty() ? std::string("master") : im.master_dtype);
  for (auto& ch : ir->source_format) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return Error::Ok;
}

}  // namespace

Result<ModelIR> import_hf(const std::string& dir_str, const ConvertOptions& options) {
  const fs::path dir(dir_str);
  const fs::path config_path = dir / "config.json";
  TERN_ASSIGN_OR_RETURN(json cj, read_json(config_path, true));
  const char* cp = config_path.c_str();

  ModelIR ir;
  ModelConfig& c = ir.config;
  TERN_RETURN_IF_ERROR(read_family(cj, cp, &c));
  const bool embedding_family = is_embedding_family(c.family);
  TERN_RETURN_IF_ERROR(read_dimensions(cj, config_path, &c));
  if (embedding_family) TERN_RETURN_IF_ERROR(read_embedding_family_config(cj, config_path, &c));
  TERN_ASSIGN_OR_RETURN(const Convention convention, read_convention(cj, cp));
  TERN_RETURN_IF_ERROR(read_special_tokens(cj, dir, &c));
  TERN_RETURN_IF_ERROR(import_weights(dir, convention, options, &ir));
  ir.source_path = dir_str;

  const std::string tok_path = options.tokenizer_path.empty() ? dir_str : options.tokenizer_path;
  TERN_ASSIGN_OR_RETURN(const bool has_tokenizer,
                        import_checkpoint_tokenizer(tok_path, options, dir_str, &ir.tokenizer));
  if (embedding_family) TERN_RETURN_IF_ERROR(read_sentence_transformers(dir, has_tokenizer, &ir));
  if (has_tokenizer) {
    if (c.bos_id < 0) c.bos_id = ir.tokenizer.bos_id;
    if (c.eos_id < 0) c.eos_id = ir.tokenizer.eos_id;
    if (c.eot_id < 0) c.eot_id = ir.tokenizer.eot_id;
  }
  return ir;
}

}  // namespace tern::convert
