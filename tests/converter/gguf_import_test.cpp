// GGUF -> ModelIR: hand-encoded blocks, a byte-by-byte mini model, the shared files written
// by llama.cpp and bitnet.cpp, and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "converter/import/gguf_import.h"
#include "tests/support/gguf_builder.h"
#include "tests/support/test_util.h"

namespace tern::convert {
namespace {

namespace fx = tern::testing::gguf_fixture;

Result<gguf::File> parse(const std::vector<uint8_t>& bytes, const char* name = "fixture.gguf") {
  return gguf::File::parse(bytes.data(), bytes.size(), name);
}

std::vector<int8_t> repeat_runs(std::initializer_list<int> run_values, int run, int times) {
  std::vector<int8_t> out;
  for (int t = 0; t < times; ++t) {
    for (int v : run_values) out.insert(out.end(), run, static_cast<int8_t>(v));
  }
  return out;
}

// The ternary decoding of a file's one tensor "w", of the given shape, GGML type and payload.
Result<TernaryTensor> decode_one(const std::vector<uint64_t>& shape, uint32_t type, const std::vector<uint8_t>& payload,
                                 const char* file = "fixture.gguf") {
  fx::Builder b;
  b.tensor("w", shape, type, payload);
  const auto bytes = b.build();
  auto f = parse(bytes, file);
  if (!f.ok()) return f.error();
  return gguf_decode_ternary(*f, f->tensors()[0]);
}

// ---- single blocks with bytes worked out by hand from the format definitions ----

TEST(GgufDecode, Tq2_0BlockByHand) {
  // 0x24 = 0b00'10'01'00: bit pairs (low first) 0, 1, 2, 0 -> codes -1, 0, +1, -1, and pair l
  // of byte m is weight 32*l + m of each 128-weight half. d = 0x3800 = 0.5.
  std::vector<uint8_t> block(64, 0x24);
  block.push_back(0x00);
  block.push_back(0x38);
  auto t = decode_one({256, 1}, fx::kTypeTQ2_0, block);
  ASSERT_TRUE(t.ok()) << last_error_message();
  EXPECT_EQ(t->codes, repeat_runs({-1, 0, 1, -1}, 32, 2));
  EXPECT_EQ(t->scale, 0.5f);
}

TEST(GgufDecode, I2sBlockByHand) {
  // bitnet.cpp x86 i2_s: weight j of a 128-block is in byte j % 32 at bits 6 - 2*(j/32), so
  // 0x24 = 0b00'10'01'00 read from the top pair down gives codes -1, +1, 0, -1 for the four
  // 32-weight groups. The float scale follows the 32 code bytes, padded to 32 bytes.
  std::vector<uint8_t> payload(64, 0);
  std::fill(payload.begin(), payload.begin() + 32, 0x24);
  const float scale = 0.25f;
  std::memcpy(&payload[32], &scale, 4);
  auto t = decode_one({128, 1}, fx::kTypeI2_S, payload);
  ASSERT_TRUE(t.ok()) << last_error_message();
  EXPECT_EQ(t->codes, repeat_runs({-1, 1, 0, -1}, 32, 1));
  EXPECT_EQ(t->scale, 0.25f);
}

TEST(GgufDecode, Tq1_0BlockByHand) {
  // Trits (2,1,0,2,1) read base 3 = 196; stored as ceil(196*256/243) = 207. Trits (0,2,1,2)
  // plus a 0 trit = 69 -> ceil(69*256/243) = 73. Codes are trit - 1; d = 0x3c00 = 1.0.
  std::vector<uint8_t> block(48, 207);
  block.insert(block.end(), 4, 73);
  block.push_back(0x00);
  block.push_back(0x3c);
  auto t = decode_one({256, 1}, fx::kTypeTQ1_0, block);
  ASSERT_TRUE(t.ok()) << last_error_message();
  std::vector<int8_t> want = repeat_runs({1, 0, -1, 1, 0}, 32, 1);  // qs[0..32), digit-major
  auto mid = repeat_runs({1, 0, -1, 1, 0}, 16, 1);                  // qs[32..48)
  auto tail = repeat_runs({-1, 1, 0, 1}, 4, 1);                     // qh
  want.insert(want.end(), mid.begin(), mid.end());
  want.insert(want.end(), tail.begin(), tail.end());
  EXPECT_EQ(t->codes, want);
  EXPECT_EQ(t->scale, 1.0f);
}

TEST(GgufDecode, RejectsDifferingBlockScalesAndInvalidCodes) {
  std::vector<int8_t> codes(512, 1);
  auto two_blocks = fx::tq2_0_payload(std::vector<int8_t>(codes.begin(), codes.begin() + 256), 0.5f);
  auto second = fx::tq2_0_payload(std::vector<int8_t>(codes.begin(), codes.begin() + 256), 0.625f);
  two_blocks.insert(two_blocks.end(), second.begin(), second.end());
  auto t = decode_one({256, 2}, fx::kTypeTQ2_0, two_blocks);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error(), Error::UnsupportedType);
  EXPECT_NE(std::string(last_error_message()).find("per-block scales that differ"), std::string::npos);

  // An all-zero block with d = 0 does not count as a different scale.
  auto zero = fx::tq2_0_payload(std::vector<int8_t>(256, 0), 0.0f);
  auto one = fx::tq2_0_payload(std::vector<int8_t>(256, -1), 0.5f);
  zero.insert(zero.end(), one.begin(), one.end());
  auto zt = decode_one({512, 1}, fx::kTypeTQ2_0, zero);
  ASSERT_TRUE(zt.ok()) << last_error_message();
  EXPECT_EQ(zt->scale, 0.5f);

  // tq2_0 code 3 is not ternary.
  std::vector<uint8_t> block(64, 0xff);
  block.push_back(0);
  block.push_back(0x38);
  auto ct = decode_one({256, 1}, fx::kTypeTQ2_0, block, "codes.gguf");
  ASSERT_FALSE(ct.ok());
  EXPECT_NE(std::string(last_error_message()).find("codes.gguf"), std::string::npos);

  // A type the reader knows but the importer does not decode (q4_K) names file, tensor, type.
  fx::Builder k;
  k.tensor("blk.0.attn_q.weight", {256, 1}, 12, std::vector<uint8_t>(144));
  auto kbytes = k.build();
  auto kf = parse(kbytes, "q4k.gguf");
  ASSERT_TRUE(kf.ok()) << last_error_message();
  auto kt = gguf_decode_ternary(*kf, kf->tensors()[0]);
  ASSERT_FALSE(kt.ok());
  EXPECT_EQ(kt.error(), Error::UnsupportedType);
  EXPECT_NE(std::string(last_error_message()).find("q4k.gguf: tensor 'blk.0.attn_q.weight' has type q4_K"),
            std::string::npos)
      << last_error_message();
  EXPECT_EQ(gguf_decode_float(*kf, kf->tensors()[0]).error(), Error::UnsupportedType);

  // f16 weights that are not {-s, 0, +s}.
  auto gt = decode_one({4, 1}, fx::kTypeF16, fx::f16_payload({0.5f, -0.5f, 0.25f, 0.0f}));
  ASSERT_FALSE(gt.ok());
  EXPECT_EQ(gt.error(), Error::UnsupportedType);
  EXPECT_NE(std::string(last_error_message()).find("not ternary"), std::string::npos);
}

TEST(GgufTokenizer, Gpt2ByteMappingRoundTrips) {
  std::string bytes;
  ASSERT_TRUE(gpt2_unicode_to_bytes("\xC4\xA0hello", &bytes));  // "Ġhello"
  EXPECT_EQ(bytes, " hello");
  ASSERT_TRUE(gpt2_unicode_to_bytes("\xC4\x80\xC4\x8A", &bytes));  // U+0100 U+010A -> 0x00 '\n'
  EXPECT_EQ(bytes, std::string("\0\n", 2));
  ASSERT_TRUE(gpt2_unicode_to_bytes("\xC5\x83", &bytes));  // U+0143, the last one: byte 0xAD
  EXPECT_EQ(bytes, "\xAD");
  EXPECT_FALSE(gpt2_unicode_to_bytes(" ", &bytes));         // a raw space is never used
  EXPECT_FALSE(gpt2_unicode_to_bytes("\xC5\x84", &bytes));  // U+0144, past the table
  EXPECT_FALSE(gpt2_unicode_to_bytes("\xC4", &bytes));      // truncated UTF-8
}

TEST(GgufTokenizer, SentencePieceVocabulary) {
  fx::Builder b;
  b.kv_str("tokenizer.ggml.model", "llama");
  b.kv_strs("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "<0x41>",
                                      "\xE2\x96\x81"
                                      "a"});  // "▁a"
  b.kv_f32s("tokenizer.ggml.scores", {0.0f, 0.0f, 0.0f, -1.0f, -2.5f});
  b.kv_i32s("tokenizer.ggml.token_type", {2, 3, 3, 6, 1});
  b.kv_u32("tokenizer.ggml.unknown_token_id", 0);
  b.kv_u32("tokenizer.ggml.bos_token_id", 1);
  b.kv_u32("tokenizer.ggml.eos_token_id", 2);
  b.kv_bool("tokenizer.ggml.add_space_prefix", false);
  auto bytes = b.build();
  auto f = parse(bytes);
  ASSERT_TRUE(f.ok()) << last_error_message();
  auto tok = gguf_import_tokenizer(*f);
  ASSERT_TRUE(tok.ok()) << last_error_message();
  EXPECT_EQ(tok->type, TokenizerType::SentencePieceBpe);
  EXPECT_EQ(tok->pieces[4],
            "\xE2\x96\x81"
            "a");  // SentencePiece pieces stay as spelled
  EXPECT_EQ(tok->scores, (std::vector<float>{0.0f, 0.0f, 0.0f, -1.0f, -2.5f}));
  EXPECT_EQ(tok->attrs, (std::vector<TokenAttr>{TokenAttr::Unknown, TokenAttr::Control, TokenAttr::Control,
                                                TokenAttr::Byte, TokenAttr::Normal}));
  EXPECT_EQ(tok->unk_id, 0);
  EXPECT_EQ(tok->bos_id, 1);
  EXPECT_EQ(tok->eos_id, 2);
  EXPECT_FALSE(tok->add_dummy_prefix);
  EXPECT_TRUE(tok->byte_fallback);

  // A BOS id outside the vocabulary is an error naming the key.
  fx::Builder bad;
  bad.kv_str("tokenizer.ggml.model", "llama");
  bad.kv_strs("tokenizer.ggml.tokens", {"a"});
  bad.kv_u32("tokenizer.ggml.bos_token_id", 5);
  auto bad_bytes = bad.build();
  auto bf = parse(bad_bytes);
  auto bt = gguf_import_tokenizer(*bf);
  ASSERT_FALSE(bt.ok());
  EXPECT_NE(std::string(last_error_message()).find("tokenizer.ggml.bos_token_id"), std::string::npos);
}

// ---- a whole mini model written byte by byte ----

// A pseudo-random ternary pattern (Knuth multiplicative hash), different per seed.
std::vector<int8_t> pattern(size_t n, uint32_t seed) {
  std::vector<int8_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i] = static_cast<int8_t>(((static_cast<uint32_t>(i) * 2654435761u + seed * 40503u) >> 13) % 3) - 1;
  }
  return out;
}
std::vector<float> scaled(const std::vector<int8_t>& codes, float s) {
  std::vector<float> out;
  for (int8_t c : codes) out.push_back(c * s);
  return out;
}
std::vector<float> ramp(size_t n, float start, float step) {
  std::vector<float> out;
  for (size_t i = 0; i < n; ++i) out.push_back(start + step * static_cast<float>(i));
  return out;
}

struct MiniModel {
  std::string arch = "bitnet";
  std::string skip;  // a tensor left out
  std::string pre = "llama-bpe";
  std::vector<uint64_t> k_dims = {256, 128};
  std::string extra_tensor;
  uint32_t layers = 1;
};

// hidden 256, ffn 256, 1 layer, 2 heads of 128, 1 KV head, vocab 8.
std::vector<uint8_t> mini_model(const MiniModel& m = {}) {
  fx::Builder b;
  const std::string a = m.arch;
  b.kv_str("general.architecture", a);
  b.kv_u32(a + ".context_length", 128);
  b.kv_u32(a + ".embedding_length", 256);
  b.kv_u32(a + ".block_count", m.layers);
  b.kv_u32(a + ".feed_forward_length", 256);
  b.kv_u32(a + ".attention.head_count", 2);
  b.kv_u32(a + ".attention.head_count_kv", 1);
  b.kv_f32(a + ".rope.freq_base", 250000.0f);
  b.kv_f32(a + ".attention.layer_norm_rms_epsilon", 1e-6f);
  b.kv_str(a + ".hidden_activation", "relu2");
  b.kv_str("tokenizer.ggml.model", "gpt2");
  b.kv_str("tokenizer.ggml.pre", m.pre);
  // Ġ = ' ', Ċ = '\n'; "<|eot|>" is a control token kept literally.
  b.kv_strs("tokenizer.ggml.tokens", {"a", "b", "\xC4\xA0",
                                      "\xC4\xA0"
                                      "a",
                                      "ab", "\xC4\x8A", "<|bos|>", "<|eot|>"});
  b.kv_i32s("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 1, 3, 3});
  b.kv_strs("tokenizer.ggml.merges", {"\xC4\xA0 a", "a b"});
  b.kv_u32("tokenizer.ggml.bos_token_id", 6);
  b.kv_u32("tokenizer.ggml.eos_token_id", 7);
  b.kv_bool("tokenizer.ggml.add_bos_token", false);
  b.kv_str("tokenizer.chat_template", "{{ x }}");

  auto add = [&](const std::string& name, std::vector<uint64_t> dims, uint32_t type, std::vector<uint8_t> payload) {
    if (name != m.skip) b.tensor(name, std::move(dims), type, std::move(payload));
  };
  add("token_embd.weight", {256, 8}, fx::kTypeF16, fx::f16_payload(ramp(2048, -4.0f, 1.0f / 256)));
  add("output_norm.weight", {256}, fx::kTypeF32, fx::f32_payload(ramp(256, 1.0f, 0.01f)));
  add("blk.0.attn_norm.weight", {256}, fx::kTypeF32, fx::f32_payload(ramp(256, 0.5f, 0.001f)));
  add("blk.0.attn_q.weight", {256, 256}, fx::kTypeTQ2_0, fx::tq2_0_payload(pattern(65536, 1), 0.5f));
  const uint64_t k_elems = m.k_dims[0] * m.k_dims[1];
  add("blk.0.attn_k.weight", m.k_dims, fx::kTypeI2_S, fx::i2_s_payload(pattern(k_elems, 2), 0.25f));
  add("blk.0.attn_v.weight", {256, 128}, fx::kTypeTQ1_0, fx::tq1_0_payload(pattern(32768, 3), 0.75f));
  add("blk.0.attn_sub_norm.weight", {256}, fx::kTypeF32, fx::f32_payload(ramp(256, 2.0f, -0.001f)));
  add("blk.0.attn_output.weight", {256, 256}, fx::kTypeF16, fx::f16_payload(scaled(pattern(65536, 4), 0.375f)));
  add("blk.0.ffn_norm.weight", {256}, fx::kTypeF32, fx::f32_payload(ramp(256, 0.0f, 0.5f)));
  add("blk.0.ffn_gate.weight", {256, 256}, fx::kTypeF32, fx::f32_payload(scaled(pattern(65536, 5), 0.125f)));
  add("blk.0.ffn_up.weight", {256, 256}, fx::kTypeTQ2_0, fx::tq2_0_payload(pattern(65536, 6), 1.5f));
  add("blk.0.ffn_sub_norm.weight", {256}, fx::kTypeF32, fx::f32_payload(ramp(256, 3.0f, 0.0f)));
  add("blk.0.ffn_down.weight", {256, 256}, fx::kTypeI2_S, fx::i2_s_payload(pattern(65536, 7), 0.0625f));
  if (!m.extra_tensor.empty()) add(m.extra_tensor, {256}, fx::kTypeF32, fx::f32_payload(ramp(256, 0, 0)));
  return b.build();
}

Result<ModelIR> import_bytes(const std::vector<uint8_t>& bytes, const char* name = "mini.gguf") {
  TERN_ASSIGN_OR_RETURN(gguf::File f, gguf::File::parse(bytes.data(), bytes.size(), name));
  return import_gguf(f, ConvertOptions{});
}

TEST(GgufImport, MiniModelByteByByte) {
  const auto bytes = mini_model();
  auto r = import_bytes(bytes);
  ASSERT_TRUE(r.ok()) << last_error_message();
  const ModelIR& ir = *r;
  const ModelConfig& c = ir.config;
  EXPECT_EQ(c.family, ModelFamily::Bitnet2B4T);
  EXPECT_EQ(c.activation, Activation::Relu2);
  EXPECT_EQ(c.rope_style, RopeStyle::RotateHalf);
  EXPECT_EQ(c.hidden, 256u);
  EXPECT_EQ(c.ffn_hidden, 256u);
  EXPECT_EQ(c.layers, 1u);
  EXPECT_EQ(c.heads, 2u);
  EXPECT_EQ(c.kv_heads, 1u);
  EXPECT_EQ(c.head_dim, 128u);
  EXPECT_EQ(c.vocab, 8u);
  EXPECT_EQ(c.max_context, 128u);
  EXPECT_EQ(c.rope_theta, 250000.0f);
  EXPECT_EQ(c.norm_eps, 1e-6f);
  EXPECT_TRUE(c.has_sub_norms);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.bos_id, 6);
  EXPECT_EQ(c.eos_id, 7);
  EXPECT_EQ(ir.tensors.size(), 13u);  // embeddings + 11 per layer + final norm

  struct Want {
    const char* name;
    std::vector<uint64_t> shape;
    std::vector<int8_t> codes;
    float scale;
  };
  const Want ternary[] = {
      {"layers.0.wq", {256, 256}, pattern(65536, 1), 0.5f},
      {"layers.0.wk", {128, 256}, pattern(32768, 2), 0.25f},
      {"layers.0.wv", {128, 256}, pattern(32768, 3), 0.75f},
      {"layers.0.wo", {256, 256}, pattern(65536, 4), 0.375f},
      {"layers.0.w_gate", {256, 256}, pattern(65536, 5), 0.125f},
      {"layers.0.w_up", {256, 256}, pattern(65536, 6), 1.5f},
      {"layers.0.w_down", {256, 256}, pattern(65536, 7), 0.0625f},
  };
  for (const auto& w : ternary) {
    const TensorIR* t = ir.find(w.name);
    ASSERT_NE(t, nullptr) << w.name;
    EXPECT_EQ(t->kind, TensorKind::Ternary) << w.name;
    EXPECT_EQ(t->shape, w.shape) << w.name;
    EXPECT_EQ(t->codes, w.codes) << w.name;
    EXPECT_EQ(t->scale, w.scale) << w.name;
    EXPECT_NE(t->source.find("mini.gguf"), std::string::npos);
  }
  const TensorIR* emb = ir.find("tok_embeddings");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->shape, (std::vector<uint64_t>{8, 256}));
  EXPECT_EQ(emb->values, ramp(2048, -4.0f, 1.0f / 256));  // exact in f16
  EXPECT_EQ(ir.find("norm")->values, ramp(256, 1.0f, 0.01f));
  EXPECT_EQ(ir.find("layers.0.attn_sub_norm")->values, ramp(256, 2.0f, -0.001f));
  EXPECT_EQ(ir.find("lm_head"), nullptr);

  const TokenizerIR& tok = ir.tokenizer;
  EXPECT_EQ(tok.type, TokenizerType::ByteLevelBpe);
  EXPECT_EQ(tok.pretokenizer, PreTokenizer::Llama3);
  EXPECT_EQ(tok.pieces, (std::vector<std::string>{"a", "b", " ", " a", "ab", "\n", "<|bos|>", "<|eot|>"}));
  EXPECT_EQ(tok.attrs[6], TokenAttr::Control);
  EXPECT_EQ(tok.attrs[0], TokenAttr::Normal);
  EXPECT_EQ(tok.merges, (std::vector<std::pair<uint32_t, uint32_t>>{{2, 0}, {0, 1}}));
  EXPECT_EQ(tok.bos_id, 6);
  EXPECT_FALSE(tok.add_bos);
  EXPECT_EQ(tok.chat_template, "{{ x }}");
}

void expect_import_error(const std::vector<uint8_t>& bytes, Error code, const std::string& words) {
  clear_last_error();
  testing::expect_failure(import_bytes(bytes, "broken.gguf"), code, {"broken.gguf", words});
}

TEST(GgufImport, RejectsBadModels) {
  MiniModel arch;
  arch.arch = "llama";
  expect_import_error(mini_model(arch), Error::UnsupportedModel, "architecture 'llama'");
  MiniModel missing;
  missing.skip = "blk.0.ffn_down.weight";
  expect_import_error(mini_model(missing), Error::UnknownTensor, "'blk.0.ffn_down.weight' is missing");
  MiniModel shape;
  shape.k_dims = {256, 256};
  expect_import_error(mini_model(shape), Error::ShapeMismatch, "shape [256, 256], expected [128, 256]");
  MiniModel extra;
  extra.extra_tensor = "blk.1.attn_norm.weight";
  expect_import_error(mini_model(extra), Error::UnknownTensor, "unexpected tensor 'blk.1.attn_norm.weight'");
  MiniModel layers;  // must fail fast, not plan a billion layers
  layers.layers = 1u << 30;
  expect_import_error(mini_model(layers), Error::CorruptFile,
                      "block_count is 1073741824 but the file has only 13 tensors");
  MiniModel pre;
  pre.pre = "falcon";  // qwen2 is supported since the Qwen3 embedding model
  expect_import_error(mini_model(pre), Error::NotSupported, "pre-tokenizer 'falcon'");
}

TEST(GgufImport, EveryTruncationIsAnErrorNotACrash) {
  const auto bytes = mini_model();
  const size_t step = std::getenv("TERN_SLOW_EMULATION") != nullptr ? 997 : 61;
  for (size_t n = 0; n < bytes.size(); n += step) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    auto r = import_bytes(cut, "cut.gguf");
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_NE(std::string(last_error_message()).find("cut.gguf"), std::string::npos) << last_error_message();
  }
}

// ---- the shared model as written by llama.cpp and bitnet.cpp ----

constexpr const char* kDir = "models/synthetic-tiny-gguf/";

TEST(GgufImport, FourSharedEncodingsDecodeToTheSameModel) {
  const std::vector<std::string> files = {"tiny-f16.gguf", "tiny-tq2_0.gguf", "tiny-tq1_0.gguf", "tiny-b158-i2_s.gguf"};
  for (const auto& f : files) TERN_REQUIRE_SHARED(kDir + f);
  TERN_REQUIRE_SHARED(std::string(kDir) + "config-and-scales.json");
  std::ifstream js(tern::testing::shared_path(std::string(kDir) + "config-and-scales.json"));
  const nlohmann::json cfg = nlohmann::json::parse(js);

  std::vector<ModelIR> models;
  for (const auto& f : files) {
    auto r = import_gguf(tern::testing::shared_path(kDir + f), ConvertOptions{});
    ASSERT_TRUE(r.ok()) << f << ": " << last_error_message();
    models.push_back(std::move(r).value());
  }
  for (size_t m = 0; m < models.size(); ++m) {
    const ModelConfig& c = models[m].config;
    SCOPED_TRACE(files[m]);
    EXPECT_EQ(c.family, ModelFamily::Bitnet2B4T);
    EXPECT_EQ(c.activation, Activation::Relu2);
    EXPECT_EQ(c.hidden, cfg["n_embd"].get<uint32_t>());
    EXPECT_EQ(c.ffn_hidden, cfg["n_ff"].get<uint32_t>());
    EXPECT_EQ(c.layers, cfg["n_layer"].get<uint32_t>());
    EXPECT_EQ(c.heads, cfg["n_head"].get<uint32_t>());
    EXPECT_EQ(c.kv_heads, cfg["n_head_kv"].get<uint32_t>());
    EXPECT_EQ(c.head_dim, cfg["head_dim"].get<uint32_t>());
    EXPECT_EQ(c.vocab, cfg["n_vocab"].get<uint32_t>());
    EXPECT_EQ(c.max_context, cfg["n_ctx"].get<uint32_t>());
    EXPECT_EQ(c.rope_theta, cfg["rope_theta"].get<float>());
    EXPECT_FLOAT_EQ(c.norm_eps, cfg["eps"].get<float>());
    EXPECT_EQ(c.bos_id, cfg["bos"].get<int32_t>());
    EXPECT_EQ(c.eos_id, cfg["eos"].get<int32_t>());
    EXPECT_EQ(c.eot_id, cfg["eot"].get<int32_t>());
    EXPECT_TRUE(c.tied_embeddings);
    EXPECT_TRUE(c.has_sub_norms);
    EXPECT_EQ(models[m].tensors.size(), models[0].tensors.size());
  }

  // Ternary tensors: identical codes in all four encodings, scales equal to the reference
  // within f16 precision.
  const std::map<std::string, std::string> gguf_to_tern = {
      {"attn_q", "wq"},       {"attn_k", "wk"},   {"attn_v", "wv"},      {"attn_output", "wo"},
      {"ffn_gate", "w_gate"}, {"ffn_up", "w_up"}, {"ffn_down", "w_down"}};
  size_t checked = 0;
  for (const auto& [key, scale] : cfg["tensor_scales"].items()) {
    const size_t dot = key.find('.', 4);
    const std::string layer = key.substr(4, dot - 4), kind = key.substr(dot + 1);
    const std::string name = "layers." + layer + "." + gguf_to_tern.at(kind);
    const float want = scale.get<float>();
    const TensorIR* ref = models[0].find(name);
    ASSERT_NE(ref, nullptr) << name;
    size_t nonzero = 0;
    for (int8_t c : ref->codes) nonzero += c != 0;
    EXPECT_GT(nonzero, ref->codes.size() / 4) << name;  // a real random ternary matrix
    for (size_t m = 0; m < models.size(); ++m) {
      const TensorIR* t = models[m].find(name);
      ASSERT_NE(t, nullptr) << files[m] << " " << name;
      EXPECT_EQ(t->kind, TensorKind::Ternary);
      EXPECT_EQ(t->shape, ref->shape) << files[m] << " " << name;
      EXPECT_TRUE(t->codes == ref->codes) << files[m] << " " << name << ": codes differ from the f16 file";
      EXPECT_NEAR(t->scale, want, want / 1024) << files[m] << " " << name;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 28u);

  // Norms are f32 everywhere: identical. Embeddings: f16 in two files, q6_K in the tq files.
  for (const auto& t : models[0].tensors) {
    if (t.kind != TensorKind::Float) continue;
    float max_abs = 0.0f;
    for (float v : t.values) max_abs = std::max(max_abs, std::fabs(v));
    for (size_t m = 1; m < models.size(); ++m) {
      const TensorIR* o = models[m].find(t.name);
      ASSERT_NE(o, nullptr) << t.name;
      ASSERT_EQ(o->values.size(), t.values.size());
      if (t.name != "tok_embeddings" || files[m] == "tiny-b158-i2_s.gguf") {
        EXPECT_EQ(o->values, t.values) << files[m] << " " << t.name;
        continue;
      }
      // q6_K keeps 6 bits per weight with a per-16 scale: error well under 2% of the range.
      double max_err = 0.0;
      for (size_t i = 0; i < t.values.size(); ++i) {
        max_err = std::max(max_err, static_cast<double>(std::fabs(o->values[i] - t.values[i])));
      }
      EXPECT_LT(max_err, 0.02 * max_abs) << files[m];
    }
  }
}

TEST(GgufImport, SharedTokenizerIsByteLevelBpe) {
  const std::string rel = std::string(kDir) + "tiny-tq2_0.gguf";
  TERN_REQUIRE_SHARED(rel);
  auto r = import_gguf(tern::testing::shared_path(rel), ConvertOptions{});
  ASSERT_TRUE(r.ok()) << last_error_message();
  const TokenizerIR& tok = r->tokenizer;
  EXPECT_EQ(tok.type, TokenizerType::ByteLevelBpe);
  EXPECT_EQ(tok.pretokenizer, PreTokenizer::Llama3);
  ASSERT_EQ(tok.pieces.size(), 512u);
  // The README's minimal vocab: the 256 bytes in byte order, then merges, fillers, specials.
  for (int b = 0; b < 256; ++b) EXPECT_EQ(tok.pieces[b], std::string(1, static_cast<char>(b))) << b;
  EXPECT_EQ(tok.pieces[256], " t");
  EXPECT_EQ(tok.pieces[260], " the");
  EXPECT_EQ(tok.pieces[509], "<|begin_of_text|>");
  EXPECT_EQ(tok.attrs[509], TokenAttr::Control);
  ASSERT_EQ(tok.merges.size(), 8u);
  EXPECT_EQ(tok.merges[0], (std::pair<uint32_t, uint32_t>{' ', 't'}));
  EXPECT_EQ(tok.merges[4], (std::pair<uint32_t, uint32_t>{256, 258}));  // "Ġt he"
  EXPECT_EQ(tok.bos_id, 509);
  EXPECT_EQ(tok.eos_id, 510);
  EXPECT_EQ(tok.eot_id, 511);
  EXPECT_TRUE(tok.add_bos);
}

}  // namespace
}  // namespace tern::convert
