// Writes small valid seed files for the fuzzers into <dir>/<target>/: GGUF files built
// byte by byte (tests/support/gguf_builder.h), a safetensors file, a config.json; given the
// directory of bundles .ci/fuzz converted, session states saved in every fuzzed KV mode.
// .ci/fuzz adds the seeds in tests/fuzz/seeds/, slices of the shared models and a converted
// bundle.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "include/tern.h"
#include "tests/fuzz/fuzz_models.h"
#include "tests/support/gguf_builder.h"

namespace fx = tern::testing::gguf_fixture;
namespace fs = std::filesystem;

static void write(const fs::path& path, const std::vector<uint8_t>& bytes) {
  fs::create_directories(path.parent_path());
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}
static void write(const fs::path& path, const std::string& text) {
  write(path, std::vector<uint8_t>(text.begin(), text.end()));
}

static std::vector<int8_t> codes(size_t n, uint32_t seed) {
  std::vector<int8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<int8_t>(((i * 2654435761u + seed) >> 13) % 3) - 1;
  return out;
}
static std::vector<float> scaled(const std::vector<int8_t>& c, float s) {
  std::vector<float> out;
  for (int8_t x : c) out.push_back(x * s);
  return out;
}

// A complete model small enough to mutate: hidden 8, ffn 8, 2 heads of 4, 1 KV head,
// vocab 4, ternary weights stored as f16 {-s, 0, +s}.
static std::vector<uint8_t> tiny_model(bool with_tokenizer) {
  fx::Builder b;
  b.kv_str("general.architecture", "bitnet");
  b.kv_u32("bitnet.context_length", 16);
  b.kv_u32("bitnet.embedding_length", 8);
  b.kv_u32("bitnet.block_count", 1);
  b.kv_u32("bitnet.feed_forward_length", 8);
  b.kv_u32("bitnet.attention.head_count", 2);
  b.kv_u32("bitnet.attention.head_count_kv", 1);
  b.kv_f32("bitnet.rope.freq_base", 10000.0f);
  b.kv_f32("bitnet.attention.layer_norm_rms_epsilon", 1e-5f);
  b.kv_str("bitnet.hidden_activation", "relu2");
  if (with_tokenizer) {
    b.kv_str("tokenizer.ggml.model", "gpt2");
    b.kv_str("tokenizer.ggml.pre", "llama-bpe");
    b.kv_strs("tokenizer.ggml.tokens", {"a", "b", "ab", "<s>"});
    b.kv_i32s("tokenizer.ggml.token_type", {1, 1, 1, 3});
    b.kv_strs("tokenizer.ggml.merges", {"a b"});
    b.kv_u32("tokenizer.ggml.bos_token_id", 3);
  }
  b.tensor("token_embd.weight", {8, 4}, fx::kTypeF16, fx::f16_payload(scaled(codes(32, 1), 0.5f)));
  b.tensor("output_norm.weight", {8}, fx::kTypeF32, fx::f32_payload(std::vector<float>(8, 1.0f)));
  const char* vecs[] = {"attn_norm", "attn_sub_norm", "ffn_norm", "ffn_sub_norm"};
  for (const char* v : vecs) {
    b.tensor(std::string("blk.0.") + v + ".weight", {8}, fx::kTypeF32, fx::f32_payload(std::vector<float>(8, 1.0f)));
  }
  b.tensor("blk.0.attn_q.weight", {8, 8}, fx::kTypeF16, fx::f16_payload(scaled(codes(64, 2), 0.25f)));
  b.tensor("blk.0.attn_k.weight", {8, 4}, fx::kTypeF16, fx::f16_payload(scaled(codes(32, 3), 0.25f)));
  b.tensor("blk.0.attn_v.weight", {8, 4}, fx::kTypeF32, fx::f32_payload(scaled(codes(32, 4), 0.25f)));
  b.tensor("blk.0.attn_output.weight", {8, 8}, fx::kTypeF16, fx::f16_payload(scaled(codes(64, 5), 0.25f)));
  b.tensor("blk.0.ffn_gate.weight", {8, 8}, fx::kTypeF16, fx::f16_payload(scaled(codes(64, 6), 0.25f)));
  b.tensor("blk.0.ffn_up.weight", {8, 8}, fx::kTypeF16, fx::f16_payload(scaled(codes(64, 7), 0.25f)));
  b.tensor("blk.0.ffn_down.weight", {8, 8}, fx::kTypeF16, fx::f16_payload(scaled(codes(64, 8), 0.25f)));
  return b.build();
}

static std::vector<uint8_t> quant_blocks() {
  fx::Builder b;
  b.kv("general.alignment", fx::kU32, fx::Bytes().put<uint32_t>(32));
  b.kv_strs("strings", {"x", "yz"});
  b.kv("nested", fx::kArray,
       fx::Bytes().put<uint32_t>(fx::kArray).put<uint64_t>(1).put<uint32_t>(fx::kU8).put<uint64_t>(1).put<uint8_t>(7));
  b.tensor("tq2", {256, 1}, fx::kTypeTQ2_0, fx::tq2_0_payload(codes(256, 9), 0.5f));
  b.tensor("tq1", {256, 1}, fx::kTypeTQ1_0, fx::tq1_0_payload(codes(256, 10), 0.5f));
  b.tensor("i2s", {128, 1}, fx::kTypeI2_S, fx::i2_s_payload(codes(128, 11), 0.5f));
  return b.build();
}

static std::vector<uint8_t> small_safetensors() {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[16,24]},"c":{"dtype":"U8","shape":[2,4],"data_offsets":[24,32]}})";
  fx::Bytes out;
  out.put<uint64_t>(header.size());
  out.data.insert(out.data.end(), header.begin(), header.end());
  for (float v : {1.0f, -2.0f, 0.5f, 0.0f}) out.put(v);
  for (uint16_t v : {0x3f80, 0xbf80, 0x0000, 0x4000}) out.put(v);
  for (int i = 0; i < 8; ++i) out.put<uint8_t>(static_cast<uint8_t>(i * 37));
  return out.data;
}

// States of a short conversation in each KV mode: after the prompt, mid-context and, for the
// evicting caches, past the capacity. The first byte is fuzz_session_state's selector (mode,
// resealed, and for the mid-context states, decoded from).
static void session_states(const fs::path& dir) {
  const char* prompt = "It is a truth universally acknowledged";
  for (size_t mode = 0; mode < tern::fuzz::kStateModeCount; ++mode) {
    const tern::fuzz::StateMode& m = tern::fuzz::kStateModes[mode];
    tern_model* model = tern::fuzz::load_model(tern::fuzz::kPlainBundle, m.kv_mode, m.context);
    tern_session_params sp = tern_session_default_params();
    sp.sampler.seed = 7;
    tern_session* s = nullptr;
    if (tern_session_create(model, &sp, &s) != TERN_OK) std::exit(1);
    int32_t ids[64];
    size_t n = 0;
    if (tern_tokenize(model, prompt, std::strlen(prompt), 1, 0, ids, 64, &n) != TERN_OK ||
        tern_prefill(s, ids, n) != TERN_OK) {
      std::exit(1);
    }
    size_t done = 0;
    for (size_t steps : {size_t{0}, size_t{6}, size_t{300}}) {
      for (; done < steps; ++done) {
        int32_t t = 0;
        if (tern_sample(s, &t) != TERN_OK || tern_decode(s, t) != TERN_OK) break;
      }
      if (done < steps) break;  // a dense cache is full: no state past it
      size_t bytes = 0;
      tern_session_state_size(s, &bytes);
      std::vector<uint8_t> state(bytes + 1);
      state[0] = static_cast<uint8_t>(0x80 | (steps == 6 ? 0x40 : 0) | mode);  // resealed; decoded from
      if (tern_session_state_save(s, state.data() + 1, bytes, &bytes) != TERN_OK) std::exit(1);
      write(dir / "fuzz_session_state" / ("mode" + std::to_string(mode) + "-" + std::to_string(steps) + ".state"),
            state);
    }
    tern_session_free(s);
    tern_model_free(model);
  }
}

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR [BUNDLE_DIR]\n", argv[0]);
    return 2;
  }
  const fs::path dir = argv[1];
  if (argc == 3) {
    setenv("TERN_FUZZ_BUNDLE_DIR", argv[2], 1);
    session_states(dir);
    return 0;
  }
  write(dir / "fuzz_gguf" / "tiny-model.gguf", tiny_model(true));
  write(dir / "fuzz_gguf" / "tiny-model-no-tokenizer.gguf", tiny_model(false));
  write(dir / "fuzz_gguf" / "quant-blocks.gguf", quant_blocks());
  write(dir / "fuzz_safetensors" / "small.safetensors", small_safetensors());
  write(dir / "fuzz_hf_config" / "llama.json",
        std::string(R"({"architectures":["LlamaForCausalLM"],"hidden_size":64,"intermediate_size":128,)"
                    R"("num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100,"rms_norm_eps":1e-6})"));
  write(
      dir / "fuzz_tokenizer_json" / "tiny.json",
      std::string(R"({"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},)"
                  R"("pre_tokenizer":{"type":"ByteLevel"},"added_tokens":[{"id":3,"content":"<s>","special":true}]})"));
  return 0;
}
