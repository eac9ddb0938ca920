// Hugging Face importer: fixtures written byte by byte (config.json, safetensors) with
// expected decoded values, bad inputs, and the repository's tiny-austen checkpoints.
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>

#include "converter/import/hf_import.h"
#include "converter/import/import.h"
#include "converter/import/safetensors.h"
#include "converter/writer/bundle_writer.h"
#include "fixtures.h"
#include "kernels/ternary_layout.h"
#include "runtime/model/bundle.h"
#include "schema/bundle_generated.h"
#include "tests/support/test_util.h"

namespace tern {
namespace {

using convert::ConvertOptions;
using testing::fixture_code;
using testing::StEntry;

struct Mat {
  const char* hf;
  const char* canon;
  uint64_t out, in;
};
// hidden 8, ffn 12, 2 heads of 4, 1 KV head.
const Mat kMats[] = {
    {"self_attn.q_proj", "wq", 8, 8},   {"self_attn.k_proj", "wk", 4, 8},   {"self_attn.v_proj", "wv", 4, 8},
    {"self_attn.o_proj", "wo", 8, 8},   {"mlp.gate_proj", "w_gate", 12, 8}, {"mlp.up_proj", "w_up", 12, 8},
    {"mlp.down_proj", "w_down", 8, 12},
};

// Master weight for a code: +1 -> 1.0, -1 -> -0.5, 0 -> +-0.0625 (all exact in bf16/f16).
float master_value(int8_t code, uint64_t i) {
  return code == 1 ? 1.0f : code == -1 ? -0.5f : (i % 2 ? 0.0625f : -0.0625f);
}
uint16_t master_f16(int8_t code, uint64_t i) {
  return code == 1 ? 0x3C00 : code == -1 ? 0xB800 : (i % 2 ? 0x2C00 : 0xAC00);
}
// Packed scale for matrix k: 2, 4, 8, ... (exact in bf16).
float packed_scale(int k) { return static_cast<float>(2 << (k % 3)); }

// The 2B-4T packing, written independently of the importer: original row R at packed
// row R % (out/4), bits 2 * (R / (out/4)), value code + 1.
std::vector<uint8_t> hf_pack(int id, uint64_t out, uint64_t in) {
  const uint64_t q = out / 4;
  std::vector<uint8_t> bytes(q * in, 0);
  for (uint64_t R = 0; R < out; ++R) {
    for (uint64_t c = 0; c < in; ++c) {
      bytes[(R % q) * in + c] |= static_cast<uint8_t>((fixture_code(id, R, c) + 1) << (2 * (R / q)));
    }
  }
  return bytes;
}

enum class Weights { Packed, Bf16, F16 };

struct Fixture {
  testing::TempDir dir;
  std::string arch = "BitNetForCausalLM";
  std::string act = "relu2";
  std::string quant = R"({"quant_method": "bitnet", "linear_class": "bitlinear", "quantization_mode": "offline"})";
  bool tied = true;
  bool sub_norms = true;
  Weights weights = Weights::Packed;
  // Hooks to break things.
  std::function<void(std::vector<StEntry>&)> edit_entries;

  std::string config() const {
    std::string s =
        "{\n  \"architectures\": [\"" + arch +
        "\"],\n  \"hidden_size\": 8,\n  \"intermediate_size\": 12,\n"
        "  \"num_hidden_layers\": 1,\n  \"num_attention_heads\": 2,\n  \"num_key_value_heads\": 1,\n"
        "  \"vocab_size\": 6,\n  \"max_position_embeddings\": 64,\n  \"rms_norm_eps\": 1e-06,\n"
        "  \"rope_theta\": 500000.0,\n  \"bos_token_id\": 3,\n  \"eos_token_id\": 4,\n  \"hidden_act\": \"" +
        act + "\",\n  \"tie_word_embeddings\": " + (tied ? "true" : "false");
    if (!quant.empty() && weights == Weights::Packed) s += ",\n  \"quantization_config\": " + quant;
    return s + "\n}\n";
  }

  std::vector<StEntry> entries() const {
    std::vector<StEntry> e;
    auto floats = [](int seed, size_t n) {
      std::vector<float> v;
      for (size_t i = 0; i < n; ++i) v.push_back(0.25f * static_cast<float>((i + seed) % 7) - 0.75f);
      return v;
    };
    e.push_back(testing::st_bf16("model.embed_tokens.weight", {6, 8}, floats(1, 48)));
    e.push_back(testing::st_bf16("model.norm.weight", {8}, floats(2, 8)));
    if (!tied) e.push_back(testing::st_bf16("lm_head.weight", {6, 8}, floats(3, 48)));
    const std::string p = "model.layers.0.";
    e.push_back(testing::st_bf16(p + "input_layernorm.weight", {8}, floats(4, 8)));
    e.push_back(testing::st_bf16(p + "post_attention_layernorm.weight", {8}, floats(5, 8)));
    if (sub_norms) {
      e.push_back(testing::st_f32(p + "self_attn.attn_sub_norm.weight", {8}, floats(6, 8)));
      e.push_back(testing::st_f32(p + "mlp.ffn_sub_norm.weight", {12}, floats(7, 12)));
    }
    int id = 0;
    for (const Mat& m : kMats) {
      const std::string name = p + m.hf + ".weight";
      if (weights == Weights::Packed) {
        e.push_back({name, "U8", {m.out / 4, m.in}, hf_pack(id, m.out, m.in)});
        e.push_back(testing::st_bf16(p + m.hf + ".weight_scale", {1}, {packed_scale(id)}));
      } else {
        std::vector<float> w;
        StEntry f16{name, "F16", {m.out, m.in}, {}};
        for (uint64_t r = 0; r < m.out; ++r) {
          for (uint64_t c = 0; c < m.in; ++c) {
            const int8_t code = fixture_code(id, r, c);
            w.push_back(master_value(code, r * m.in + c));
            const uint16_t h = master_f16(code, r * m.in + c);
            testing::append_le(f16.bytes, &h, 2);
          }
        }
        e.push_back(weights == Weights::Bf16 ? testing::st_bf16(name, {m.out, m.in}, w) : f16);
      }
      ++id;
    }
    return e;
  }

  void write() {
    testing::write_text(dir.file("config.json"), config());
    auto e = entries();
    if (edit_entries) edit_entries(e);
    testing::write_bytes(dir.file("model.safetensors"), testing::safetensors_bytes(e));
  }
};

ConvertOptions no_tokenizer() {
  ConvertOptions o;
  o.require_tokenizer = false;
  return o;
}

Result<convert::ModelIR> import(Fixture& f) {
  f.write();
  return convert::import_model(f.dir.path(), no_tokenizer());
}

// mean|W| of a master matrix, computed from the code counts.
float expected_master_scale(int id, const Mat& m) {
  double sum = 0;
  for (uint64_t r = 0; r < m.out; ++r) {
    for (uint64_t c = 0; c < m.in; ++c) sum += std::fabs(master_value(fixture_code(id, r, c), r * m.in + c));
  }
  return static_cast<float>(sum / static_cast<double>(m.out * m.in));
}

void expect_codes(const convert::ModelIR& ir) {
  int id = 0;
  for (const Mat& m : kMats) {
    const auto* t = ir.find(std::string("layers.0.") + m.canon);
    ASSERT_NE(t, nullptr) << m.canon;
    ASSERT_EQ(t->kind, convert::TensorKind::Ternary);
    ASSERT_EQ(t->shape, (std::vector<uint64_t>{m.out, m.in}));
    for (uint64_t r = 0; r < m.out; ++r) {
      for (uint64_t c = 0; c < m.in; ++c) {
        ASSERT_EQ(t->codes[r * m.in + c], fixture_code(id, r, c)) << m.canon << " " << r << "," << c;
      }
    }
    ++id;
  }
}

TEST(HfImport, PackedBitLinearUsesTheDivideConvention) {
  Fixture f;
  auto ir = import(f);
  ASSERT_TRUE(ir.ok()) << last_error_message();
  expect_codes(*ir);
  for (int id = 0; id < 7; ++id) {
    EXPECT_FLOAT_EQ(ir->find(std::string("layers.0.") + kMats[id].canon)->scale, 1.0f / packed_scale(id));
  }
  const ModelConfig& c = ir->config;
  EXPECT_EQ(c.family, ModelFamily::Bitnet2B4T);
  EXPECT_EQ(c.hidden, 8u);
  EXPECT_EQ(c.ffn_hidden, 12u);
  EXPECT_EQ(c.heads, 2u);
  EXPECT_EQ(c.kv_heads, 1u);
  EXPECT_EQ(c.head_dim, 4u);  // hidden / heads when config.json has no head_dim
  EXPECT_EQ(c.vocab, 6u);
  EXPECT_EQ(c.max_context, 64u);
  EXPECT_EQ(c.rope_theta, 500000.0f);
  EXPECT_EQ(c.norm_eps, 1e-6f);
  EXPECT_EQ(c.rope_style, RopeStyle::RotateHalf);
  EXPECT_EQ(c.activation, Activation::Relu2);
  EXPECT_TRUE(c.has_sub_norms);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.bos_id, 3);
  EXPECT_EQ(c.eos_id, 4);
  EXPECT_EQ(ir->source_format, "hf-safetensors-packed");
  // Floats decode exactly: bf16 embedding value i is 0.25 * ((i + 1) % 7) - 0.75.
  const auto* emb = ir->find("tok_embeddings");
  ASSERT_NE(emb, nullptr);
  for (size_t i = 0; i < 48; ++i) EXPECT_EQ(emb->values[i], 0.25f * static_cast<float>((i + 1) % 7) - 0.75f);
  const auto* sub = ir->find("layers.0.ffn_sub_norm");
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->values[11], 0.25f * static_cast<float>((11 + 7) % 7) - 0.75f);
  EXPECT_EQ(ir->find("lm_head"), nullptr);
}

TEST(HfImport, PackedAutoBitLinearUsesTheMultiplyConvention) {
  Fixture f;
  f.quant = R"({"quant_method": "bitnet", "linear_class": "autobitlinear"})";
  auto ir = import(f);
  ASSERT_TRUE(ir.ok()) << last_error_message();
  expect_codes(*ir);
  for (int id = 0; id < 7; ++id)
    EXPECT_EQ(ir->find(std::string("layers.0.") + kMats[id].canon)->scale, packed_scale(id));
}

TEST(HfImport, Bf16MasterWeightsAreTernarizedByAbsmean) {
  Fixture f;
  f.weights = Weights::Bf16;
  auto ir = import(f);
  ASSERT_TRUE(ir.ok()) << last_error_message();
  expect_codes(*ir);
  for (int id = 0; id < 7; ++id) {
    EXPECT_FLOAT_EQ(ir->find(std::string("layers.0.") + kMats[id].canon)->scale, expected_master_scale(id, kMats[id]));
  }
  EXPECT_EQ(ir->source_format, "hf-safetensors-bf16");
}

TEST(HfImport, LlamaBitnetWithF16MastersAndUntiedHead) {
  Fixture f;
  f.arch = "BitnetForCausalLM";
  f.act = "silu";
  f.tied = false;
  f.sub_norms = false;
  f.weights = Weights::F16;
  auto ir = import(f);
  ASSERT_TRUE(ir.ok()) << last_error_message();
  expect_codes(*ir);
  EXPECT_EQ(ir->config.family, ModelFamily::LlamaBitnet);
  EXPECT_EQ(ir->config.activation, Activation::Silu);
  EXPECT_FALSE(ir->config.has_sub_norms);
  EXPECT_FALSE(ir->config.tied_embeddings);
  EXPECT_EQ(ir->find("layers.0.attn_sub_norm"), nullptr);
  const auto* head = ir->find("lm_head");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->values[0], 0.25f * 3 - 0.75f);
  EXPECT_FLOAT_EQ(ir->find("layers.0.wq")->scale, expected_master_scale(0, kMats[0]));

  // The same with the LLaMA architecture name.
  Fixture g;
  g.arch = "LlamaForCausalLM", g.act = "silu", g.tied = false, g.sub_norms = false, g.weights = Weights::F16;
  auto ir2 = import(g);
  ASSERT_TRUE(ir2.ok()) << last_error_message();
  EXPECT_EQ(ir2->config.family, ModelFamily::LlamaBitnet);
}

TEST(HfImport, ShardedCheckpointMatchesSingleFile) {
  Fixture f;
  f.write();
  auto entries = f.entries();
  std::vector<StEntry> a(entries.begin(), entries.begin() + entries.size() / 2);
  std::vector<StEntry> b(entries.begin() + entries.size() / 2, entries.end());
  testing::TempDir sharded;
  testing::write_text(sharded.file("config.json"), f.config());
  testing::write_bytes(sharded.file("model-00001-of-00002.safetensors"), testing::safetensors_bytes(a));
  testing::write_bytes(sharded.file("model-00002-of-00002.safetensors"), testing::safetensors_bytes(b));
  std::string index = "{\"metadata\": {}, \"weight_map\": {";
  for (size_t i = 0; i < entries.size(); ++i) {
    index += (i ? ", \"" : "\"") + entries[i].name + "\": \"model-0000" + (i < a.size() ? "1" : "2") +
             "-of-00002.safetensors\"";
  }
  testing::write_text(sharded.file("model.safetensors.index.json"), index + "}}");
  auto ir = convert::import_model(sharded.path(), no_tokenizer());
  ASSERT_TRUE(ir.ok()) << last_error_message();
  expect_codes(*ir);
  auto single = convert::import_model(f.dir.path(), no_tokenizer());
  ASSERT_TRUE(single.ok());
  ASSERT_EQ(ir->tensors.size(), single->tensors.size());
  for (size_t i = 0; i < ir->tensors.size(); ++i) {
    EXPECT_EQ(ir->tensors[i].name, single->tensors[i].name);
    EXPECT_EQ(ir->tensors[i].values, single->tensors[i].values);
    EXPECT_EQ(ir->tensors[i].scale, single->tensors[i].scale);
  }
  // A missing shard is named.
  std::remove(sharded.file("model-00002-of-00002.safetensors").c_str());
  EXPECT_EQ(convert::import_model(sharded.path(), no_tokenizer()).error(), Error::FileNotFound);
  EXPECT_NE(std::string(last_error_message()).find("model-00002-of-00002.safetensors"), std::string::npos);
}

TEST(HfImport, DefaultOptionsRequireATokenizer) {
  Fixture f;
  f.write();
  auto ir = convert::import_model(f.dir.path(), ConvertOptions{});
  EXPECT_FALSE(ir.ok());
}

// Error code and a message naming `needle` (a file or tensor).
void expect_failure(Fixture& f, Error code, const std::string& needle) {
  auto ir = import(f);
  ASSERT_FALSE(ir.ok());
  EXPECT_EQ(ir.error(), code) << last_error_message();
  EXPECT_NE(std::string(last_error_message()).find(needle), std::string::npos) << last_error_message();
}

TEST(HfImport, BadConfigs) {
  {
    Fixture f;
    f.arch = "GPT2LMHeadModel";
    expect_failure(f, Error::UnsupportedModel, "config.json");
  }
  {
    Fixture f;
    f.quant = R"({"quant_method": "bitnet", "linear_class": "fancylinear"})";
    expect_failure(f, Error::NotSupported, "fancylinear");
  }
  {
    Fixture f;
    f.quant = R"({"quant_method": "gptq", "bits": 4})";
    expect_failure(f, Error::NotSupported, "gptq");
  }
  {
    Fixture f;
    f.quant = "";  // packed uint8 weights but nothing says how to read them
    expect_failure(f, Error::NotSupported, "quantization_config");
  }
  {
    Fixture f;
    f.act = "gelu";
    expect_failure(f, Error::UnsupportedModel, "gelu");
  }
  {
    testing::TempDir empty;
    auto ir = convert::import_hf(empty.path(), no_tokenizer());
    EXPECT_EQ(ir.error(), Error::FileNotFound);
    EXPECT_NE(std::string(last_error_message()).find("config.json"), std::string::npos);
  }
  {
    Fixture f;
    f.write();
    testing::write_text(f.dir.file("config.json"), "{\"architectures\": [\"BitNetForCausalLM\"], \"hidden_size\": ");
    auto ir = convert::import_model(f.dir.path(), no_tokenizer());
    EXPECT_EQ(ir.error(), Error::CorruptFile);
    EXPECT_NE(std::string(last_error_message()).find("config.json"), std::string::npos);
  }
}

TEST(HfImport, BadTensors) {
  {
    Fixture f;
    f.edit_entries = [](std::vector<StEntry>& e) {
      for (auto it = e.begin(); it != e.end(); ++it) {
        if (it->name == "model.layers.0.self_attn.k_proj.weight") {
          e.erase(it);
          break;
        }
      }
    };
    expect_failure(f, Error::UnknownTensor, "model.layers.0.self_attn.k_proj.weight");
  }
  {
    Fixture f;
    f.edit_entries = [](std::vector<StEntry>& e) {
      for (auto& x : e) {
        if (x.name == "model.layers.0.self_attn.q_proj.weight") x.shape = {4, 4};  // same bytes, wrong shape
      }
    };
    expect_failure(f, Error::ShapeMismatch, "q_proj");
  }
  {
    Fixture f;
    f.edit_entries = [](std::vector<StEntry>& e) {
      for (auto& x : e) {
        if (x.name == "model.norm.weight") x.dtype = "F64";
      }
    };
    expect_failure(f, Error::UnsupportedType, "F64");
  }
  {
    Fixture f;
    f.edit_entries = [](std::vector<StEntry>& e) {
      for (auto& x : e) {
        if (x.name == "model.layers.0.mlp.up_proj.weight") x.bytes[5] = 0xff;  // value 3 is not a code
      }
    };
    expect_failure(f, Error::CorruptFile, "up_proj");
  }
  {
    Fixture f;
    f.edit_entries = [](std::vector<StEntry>& e) {
      for (auto& x : e) {
        if (x.name == "model.layers.0.mlp.up_proj.weight_scale") x.bytes = {0x00, 0x00};  // scale 0
      }
    };
    expect_failure(f, Error::CorruptFile, "weight_scale");
  }
}

TEST(Safetensors, TruncatedAtEveryByteIsRejectedWithTheFileName) {
  Fixture f;
  const auto bytes = testing::safetensors_bytes(f.entries());
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto st = convert::SafetensorsFile::parse(bytes.data(), n, "cut.safetensors");
    ASSERT_FALSE(st.ok()) << n;
    ASSERT_TRUE(st.error() == Error::Truncated || st.error() == Error::CorruptFile)
        << n << ": " << last_error_message();
    ASSERT_NE(std::string(last_error_message()).find("cut.safetensors"), std::string::npos);
  }
  EXPECT_TRUE(convert::SafetensorsFile::parse(bytes.data(), bytes.size(), "whole.safetensors").ok());
  // Through the importer: a truncated file gives Truncated and names the file.
  f.write();
  std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 10);
  testing::write_bytes(f.dir.file("model.safetensors"), cut);
  auto ir = convert::import_model(f.dir.path(), no_tokenizer());
  EXPECT_EQ(ir.error(), Error::Truncated);
  EXPECT_NE(std::string(last_error_message()).find("model.safetensors"), std::string::npos);
}

TEST(Safetensors, HeaderProblems) {
  auto parse = [](const std::vector<uint8_t>& b) {
    return convert::SafetensorsFile::parse(b.data(), b.size(), "x.st").error();
  };
  auto with_header = [](const std::string& h) {
    std::vector<uint8_t> b;
    for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(static_cast<uint64_t>(h.size()) >> (8 * i)));
    b.insert(b.end(), h.begin(), h.end());
    return b;
  };
  std::vector<uint8_t> huge = with_header("{}");
  huge[7] = 0x7f;  // header length ~ 2^62
  EXPECT_EQ(parse(huge), Error::CorruptFile);
  EXPECT_EQ(parse(with_header("GGUF....")), Error::BadMagic);
  EXPECT_EQ(parse(with_header("{\"a\": {\"dtype\": ")), Error::CorruptFile);
  EXPECT_EQ(parse(with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})")), Error::Truncated);
  EXPECT_EQ(parse(with_header(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 0]}})")), Error::CorruptFile);
  EXPECT_EQ(parse(with_header(R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [4, 0]}})")), Error::CorruptFile);
  EXPECT_EQ(parse(with_header(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}})")),
            Error::CorruptFile);
  EXPECT_EQ(parse(with_header(R"({"a": {"dtype": "I64", "shape": [0], "data_offsets": [0, 0]}})")),
            Error::UnsupportedType);
  auto ok = with_header(R"({"a": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}})");
  ok.insert(ok.end(), {0x80, 0x3f, 0x00, 0xc0});  // bf16 1.0, -2.0
  auto st = convert::SafetensorsFile::parse(ok.data(), ok.size(), "ok.st");
  ASSERT_TRUE(st.ok()) << last_error_message();
  auto v = st->read_float(*st->find("a"));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ((*v)[0], 1.0f);
  EXPECT_EQ((*v)[1], -2.0f);
}

// The two published layouts of one trained model hold the same ternary weights.
TEST(TinyAusten, PackedAndBf16HoldIdenticalCodesAndScalesWithinBf16) {
  auto packed = convert::import_model(testing::tiny_austen_packed_dir(), ConvertOptions{});
  ASSERT_TRUE(packed.ok()) << last_error_message();
  auto master = convert::import_model(testing::tiny_austen_bf16_dir(), ConvertOptions{});
  ASSERT_TRUE(master.ok()) << last_error_message();
  EXPECT_EQ(packed->source_format, "hf-safetensors-packed");
  EXPECT_EQ(master->source_format, "hf-safetensors-bf16");
  ASSERT_EQ(packed->tensors.size(), master->tensors.size());
  size_t ternary = 0;
  for (const auto& p : packed->tensors) {
    const auto* m = master->find(p.name);
    ASSERT_NE(m, nullptr) << p.name;
    ASSERT_EQ(p.kind, m->kind) << p.name;
    ASSERT_EQ(p.shape, m->shape) << p.name;
    if (p.kind == convert::TensorKind::Ternary) {
      ++ternary;
      ASSERT_EQ(p.codes, m->codes) << p.name;
      // weight_scale is stored in bf16: 8 significant bits.
      EXPECT_NEAR(p.scale, m->scale, m->scale * (1.0f / 256.0f)) << p.name;
    } else {
      EXPECT_EQ(p.values, m->values) << p.name;  // both bf16 in the checkpoints
    }
  }
  EXPECT_EQ(ternary, 6u * 7u);
  EXPECT_EQ(packed->config.vocab, 2048u);
  EXPECT_EQ(packed->config.kv_heads, 2u);
  EXPECT_EQ(packed->config.head_dim, 32u);
  EXPECT_EQ(packed->config.bos_id, 2045);
  EXPECT_EQ(packed->config.eos_id, 2046);
  EXPECT_EQ(packed->tokenizer.pieces.size(), 2048u);
}

// The same through the writer and the loader: the two bundles hold the same codes.
TEST(TinyAusten, PackedAndBf16BundlesHoldIdenticalCodes) {
  testing::TempFile packed_file(".tern"), master_file(".tern");
  for (const auto& [dir, file] : {std::make_pair(testing::tiny_austen_packed_dir(), &packed_file),
                                  std::make_pair(testing::tiny_austen_bf16_dir(), &master_file)}) {
    auto ir = convert::import_model(dir, ConvertOptions{});
    ASSERT_TRUE(ir.ok()) << last_error_message();
    ASSERT_TRUE(convert::write_bundle(file->path(), convert::contents_from_ir(*ir, ConvertOptions{})).ok())
        << last_error_message();
  }
  auto packed = Bundle::open(packed_file.path().c_str());
  auto master = Bundle::open(master_file.path().c_str());
  ASSERT_TRUE(packed.ok() && master.ok()) << last_error_message();
  ASSERT_EQ(packed->tensor_count(), master->tensor_count());
  size_t ternary = 0;
  for (size_t i = 0; i < packed->tensor_count(); ++i) {
    auto p = packed->tensor_at(i);
    ASSERT_TRUE(p.ok());
    auto m = master->tensor(p->name);
    ASSERT_TRUE(m.ok()) << p->name;
    if (p->type != TensorType::Ternary) continue;
    ++ternary;
    const TernaryMatrix pm = p->as_ternary(), mm = m->as_ternary();
    std::vector<int8_t> pc(pm.rows * pm.cols), mc(mm.rows * mm.cols);
    ASSERT_EQ(ternary_unpack(pm.layout, pm.data, pm.size_bytes, pm.rows, pm.cols, pc.data()), Error::Ok);
    ASSERT_EQ(ternary_unpack(mm.layout, mm.data, mm.size_bytes, mm.rows, mm.cols, mc.data()), Error::Ok);
    ASSERT_EQ(pc, mc) << p->name;
    EXPECT_NEAR(p->scale, m->scale, m->scale / 256.0f) << p->name;
  }
  EXPECT_EQ(ternary, 42u);
  EXPECT_EQ(packed->config().family, ModelFamily::Bitnet2B4T);
  EXPECT_GT(packed->tokenizer()->piece_offsets()->size(), 2048u);
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

// --keep-layers N: the first N layers of the checkpoint, tensor for tensor, and everything
// outside the layers (embeddings, final norm); more layers than the model has is refused.
TEST(KeepLayers, TheFirstLayersOfTheFullModel) {
  auto full = convert::import_model(testing::tiny_austen_packed_dir(), ConvertOptions{});
  ASSERT_TRUE(full.ok()) << last_error_message();
  ConvertOptions options;
  options.keep_layers = 2;
  auto draft = convert::import_model(testing::tiny_austen_packed_dir(), options);
  ASSERT_TRUE(draft.ok()) << last_error_message();
  EXPECT_EQ(draft->config.layers, 2u);
  EXPECT_EQ(full->config.layers, 6u);
  size_t kept = 0;
  for (const auto& t : full->tensors) {
    unsigned layer = 0;
    const bool in_layer = std::sscanf(t.name.c_str(), "layers.%u.", &layer) == 1;
    const auto* d = draft->find(t.name);
    if (in_layer && layer >= 2) {
      EXPECT_EQ(d, nullptr) << t.name;
      continue;
    }
    ASSERT_NE(d, nullptr) << t.name;
    EXPECT_EQ(d->codes, t.codes) << t.name;
    EXPECT_EQ(d->values, t.values) << t.name;
    EXPECT_EQ(d->scale, t.scale) << t.name;
    ++kept;
  }
  EXPECT_EQ(kept, draft->tensors.size());
  options.keep_layers = 7;
  testing::expect_failure(convert::import_model(testing::tiny_austen_packed_dir(), options), Error::InvalidArgument,
                          {"--keep-layers 7", "only 6 layers"});
}

}  // namespace
}  // namespace tern
