// bitllama2c importer: a .bin built byte by byte in the test, bad files, the real
// bitllama2c-3M checked against values read independently from the .bin, and the CLIs.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "converter/import/bitllama2c_import.h"
#include "converter/import/import.h"
#include "converter/writer/bundle_writer.h"
#include "fixtures.h"
#include "kernels/dense_matmul.h"
#include "kernels/ternary_layout.h"
#include "runtime/model/bundle.h"
#include "tests/support/test_util.h"

namespace tern {
namespace {

using convert::ConvertOptions;
using testing::fixture_code;

struct BinSpec {
  int32_t dim = 8, hidden = 12, layers = 2, heads = 2, kv_heads = 1, vocab = 5, seq = 16;
  uint8_t shared = 1;
};

const char* kKinds[] = {"wq", "wk", "wv", "wo", "w_gate", "w_down", "w_up"};  // file order: wq wk wv wo w1 w2 w3

void kind_shape(const BinSpec& s, int kind, uint64_t* out, uint64_t* in) {
  const uint64_t kv = static_cast<uint64_t>(s.kv_heads) * (s.dim / s.heads);
  const uint64_t shapes[7][2] = {{uint64_t(s.dim), uint64_t(s.dim)},
                                 {kv, uint64_t(s.dim)},
                                 {kv, uint64_t(s.dim)},
                                 {uint64_t(s.dim), uint64_t(s.dim)},
                                 {uint64_t(s.hidden), uint64_t(s.dim)},
                                 {uint64_t(s.dim), uint64_t(s.hidden)},
                                 {uint64_t(s.hidden), uint64_t(s.dim)}};
  *out = shapes[kind][0];
  *in = shapes[kind][1];
}

float emb_value(size_t i) { return 0.5f * static_cast<float>(i % 5) - 1.0f; }

std::vector<uint8_t> build_bin(const BinSpec& s) {
  std::vector<uint8_t> b(256, 0);
  const uint32_t magic = 0x616b3432;
  const int32_t header[8] = {1, s.dim, s.hidden, s.layers, s.heads, s.kv_heads, s.vocab, s.seq};
  std::memcpy(b.data(), &magic, 4);
  std::memcpy(b.data() + 4, header, sizeof(header));
  b[36] = s.shared;
  auto put_f = [&](float f) { testing::append_le(b, &f, 4); };
  for (int i = 0; i < s.dim; ++i) put_f(1.0f + 0.125f * static_cast<float>(i));
  for (size_t i = 0; i < static_cast<size_t>(s.vocab) * s.dim; ++i) put_f(emb_value(i));
  for (int k = 0; k < 7; ++k) {
    for (int l = 0; l < s.layers; ++l) {
      uint64_t out, in;
      kind_shape(s, k, &out, &in);
      put_f(0.25f * static_cast<float>(k * s.layers + l + 1));
      const int id = k * s.layers + l;
      // Four codes per byte, most significant pair first: 00 = 0, 01 = +1, 11 = -1.
      for (uint64_t i = 0; i < out * in; i += 4) {
        uint8_t byte = 0;
        for (uint64_t j = 0; j < 4; ++j) {
          const int8_t code = fixture_code(id, (i + j) / in, (i + j) % in);
          const uint8_t bits = code == 0 ? 0 : (code == 1 ? 1 : 3);
          byte = static_cast<uint8_t>(byte | (bits << (6 - 2 * j)));
        }
        b.push_back(byte);
      }
    }
  }
  if (!s.shared) {
    for (size_t i = 0; i < static_cast<size_t>(s.vocab) * s.dim; ++i) put_f(-emb_value(i));
  }
  return b;
}

TEST(Bitllama2c, FixtureDecodes) {
  const BinSpec s;
  const auto bin = build_bin(s);
  auto ir = convert::import_bitllama2c_bytes(bin.data(), bin.size(), "fixture.bin");
  ASSERT_TRUE(ir.ok()) << last_error_message();
  const ModelConfig& c = ir->config;
  EXPECT_EQ(c.family, ModelFamily::Bitllama2c);
  EXPECT_EQ(c.hidden, 8u);
  EXPECT_EQ(c.ffn_hidden, 12u);
  EXPECT_EQ(c.layers, 2u);
  EXPECT_EQ(c.heads, 2u);
  EXPECT_EQ(c.kv_heads, 1u);
  EXPECT_EQ(c.head_dim, 4u);
  EXPECT_EQ(c.vocab, 5u);
  EXPECT_EQ(c.max_context, 16u);
  EXPECT_EQ(c.rope_style, RopeStyle::AdjacentPairs);
  EXPECT_EQ(c.activation, Activation::Silu);
  EXPECT_FALSE(c.has_sub_norms);
  EXPECT_TRUE(c.tied_embeddings);
  for (int k = 0; k < 7; ++k) {
    for (int l = 0; l < s.layers; ++l) {
      const std::string name = "layers." + std::to_string(l) + "." + kKinds[k];
      const auto* t = ir->find(name);
      ASSERT_NE(t, nullptr) << name;
      uint64_t out, in;
      kind_shape(s, k, &out, &in);
      ASSERT_EQ(t->shape, (std::vector<uint64_t>{out, in})) << name;
      EXPECT_EQ(t->scale, 0.25f * static_cast<float>(k * s.layers + l + 1)) << name;
      for (uint64_t r = 0; r < out; ++r) {
        for (uint64_t col = 0; col < in; ++col) {
          ASSERT_EQ(t->codes[r * in + col], fixture_code(k * s.layers + l, r, col)) << name;
        }
      }
    }
  }
  EXPECT_EQ(ir->find("layers.0.attn_norm"), nullptr);  // bitllama2c has no per-layer norm weights
  const auto* norm = ir->find("norm");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->values[3], 1.375f);
  const auto* emb = ir->find("tok_embeddings");
  ASSERT_NE(emb, nullptr);
  for (size_t i = 0; i < emb->values.size(); ++i) ASSERT_EQ(emb->values[i], emb_value(i));
  EXPECT_EQ(ir->find("lm_head"), nullptr);

  // The IR makes a loadable bundle.
  testing::TempFile out(".tern");
  ASSERT_TRUE(convert::write_bundle(out.path(), convert::contents_from_ir(*ir, ConvertOptions{})).ok());
  EXPECT_TRUE(Bundle::open(out.path().c_str()).ok()) << last_error_message();
}

TEST(Bitllama2c, UnsharedClassifierBecomesLmHead) {
  BinSpec s;
  s.shared = 0;
  const auto bin = build_bin(s);
  auto ir = convert::import_bitllama2c_bytes(bin.data(), bin.size(), "fixture.bin");
  ASSERT_TRUE(ir.ok()) << last_error_message();
  EXPECT_FALSE(ir->config.tied_embeddings);
  const auto* head = ir->find("lm_head");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->values[7], -emb_value(7));
}

TEST(Bitllama2c, BadFiles) {
  const BinSpec s;
  const auto bin = build_bin(s);
  auto run = [](const std::vector<uint8_t>& b, size_t n) {
    return convert::import_bitllama2c_bytes(b.data(), n, "model-under-test.bin").error();
  };
  for (size_t n = 0; n < bin.size(); ++n) {
    const Error e = run(bin, n);
    ASSERT_EQ(e, Error::Truncated) << n << ": " << last_error_message();
    ASSERT_NE(std::string(last_error_message()).find("model-under-test.bin"), std::string::npos);
  }
  auto copy = bin;
  copy[0] ^= 1;
  EXPECT_EQ(run(copy, copy.size()), Error::BadMagic);
  copy = bin;
  copy.push_back(0);
  EXPECT_EQ(run(copy, copy.size()), Error::CorruptFile);  // trailing bytes: header and data disagree
  copy = bin;
  copy[8] = 0;  // dim 0
  EXPECT_EQ(run(copy, copy.size()), Error::CorruptFile);
  copy = bin;
  copy[4] = 7;  // version 7
  EXPECT_EQ(run(copy, copy.size()), Error::NotSupported);
  copy = bin;
  // First code byte of layers.0.wq: after the header, norm, embeddings and the scale.
  copy[256 + 4 * 8 + 4 * 5 * 8 + 4] = 0x80;  // pair 0b10 is not a code
  EXPECT_EQ(run(copy, copy.size()), Error::CorruptFile);
  EXPECT_NE(std::string(last_error_message()).find("layers.0.wq"), std::string::npos);
}

// Reads a matrix straight from the .bin, with offsets computed from the README layout.
struct BinMatrix {
  float scale;
  std::vector<int8_t> codes;
};
BinMatrix read_bin_matrix(const std::vector<uint8_t>& bin, const BinSpec& s, int kind, int layer) {
  size_t off = 256 + 4 * static_cast<size_t>(s.dim) + 4 * static_cast<size_t>(s.vocab) * s.dim;
  for (int k = 0; k <= kind; ++k) {
    uint64_t out, in;
    kind_shape(s, k, &out, &in);
    const size_t bytes = 4 + out * in / 4;
    if (k < kind) {
      off += bytes * s.layers;
    } else {
      off += bytes * layer;
      BinMatrix m;
      std::memcpy(&m.scale, bin.data() + off, 4);
      for (uint64_t i = 0; i < out * in; ++i) {
        const int pair = (bin[off + 4 + i / 4] >> (6 - 2 * (i % 4))) & 3;
        m.codes.push_back(pair == 0 ? 0 : pair == 1 ? 1 : -1);
      }
      return m;
    }
  }
  return {};
}

TEST(Bitllama2c, Real3MBundleMatchesTheBin) {
  TERN_REQUIRE_SHARED("models/bitllama2c-3M/bit_model.bin");
  const std::string path = testing::shared_path("models/bitllama2c-3M/bit_model.bin");
  const auto bin = testing::read_file_bytes(path);
  BinSpec s;  // from the README: dim 256, 8 layers, 8 heads, 4 KV heads, FFN 256, vocab 512
  s.dim = 256, s.hidden = 256, s.layers = 8, s.heads = 8, s.kv_heads = 4, s.vocab = 512, s.seq = 512;

  ConvertOptions o;
  o.require_tokenizer = false;  // the tokenizer has its own tests; this one is about weights
  auto ir = convert::import_model(path, o);
  ASSERT_TRUE(ir.ok()) << last_error_message();
  testing::TempFile out(".tern");
  ASSERT_TRUE(convert::write_bundle(out.path(), convert::contents_from_ir(*ir, o)).ok()) << last_error_message();
  auto b = Bundle::open(out.path().c_str());
  ASSERT_TRUE(b.ok()) << last_error_message();
  EXPECT_EQ(b->config().hidden, 256u);
  EXPECT_EQ(b->config().kv_heads, 4u);
  EXPECT_EQ(b->config().vocab, 512u);
  EXPECT_EQ(b->config().family, ModelFamily::Bitllama2c);

  const struct { int kind, layer; } picks[] = {{0, 0}, {1, 3}, {3, 6}, {5, 7}, {6, 5}};
  for (const auto& p : picks) {
    const BinMatrix want = read_bin_matrix(bin, s, p.kind, p.layer);
    auto v = b->layer_tensor(p.layer, kKinds[p.kind]);
    ASSERT_TRUE(v.ok()) << kKinds[p.kind];
    EXPECT_EQ(v->scale, want.scale);
    const TernaryMatrix m = v->as_ternary();
    std::vector<int8_t> codes(m.rows * m.cols);
    ASSERT_EQ(ternary_unpack(m.layout, m.data, m.size_bytes, m.rows, m.cols, codes.data()), Error::Ok);
    ASSERT_EQ(codes, want.codes) << "layers." << p.layer << "." << kKinds[p.kind];
    size_t nonzero = 0;
    for (int8_t c : codes) nonzero += c != 0;
    EXPECT_GT(nonzero, codes.size() / 4);  // a trained model, not an all-zero decode
  }
  // Final norm (f32, exact) and embeddings (f16 by default) from their README offsets.
  auto norm = b->tensor("norm");
  ASSERT_TRUE(norm.ok());
  EXPECT_EQ(std::memcmp(norm->data, bin.data() + 256, 256 * 4), 0);
  auto emb = b->tensor("tok_embeddings");
  ASSERT_TRUE(emb.ok());
  std::vector<float> row(256);
  dense_row_f32(emb->as_dense(), 100, row.data());
  for (int c = 0; c < 256; ++c) {
    float want;
    std::memcpy(&want, bin.data() + 256 + 1024 + (100 * 256 + c) * 4, 4);
    ASSERT_NEAR(row[c], want, std::fabs(want) / 1024 + 1e-7f) << c;
  }
}

TEST(Import, DetectsTheFormatFromPathAndMagic) {
  testing::TempDir dir;
  const BinSpec s;
  testing::write_bytes(dir.file("weights.bin"), build_bin(s));
  testing::write_bytes(dir.file("model.gguf"), {'G', 'G', 'U', 'F', 3, 0, 0, 0});
  testing::write_bytes(dir.file("other.dat"), {1, 2, 3, 4, 5});
  EXPECT_EQ(convert::detect_format(dir.file("weights.bin")), convert::InputFormat::Bitllama2c);
  EXPECT_EQ(convert::detect_format(dir.file("model.gguf")), convert::InputFormat::Gguf);
  EXPECT_EQ(convert::detect_format(dir.file("other.dat")), convert::InputFormat::Unknown);
  EXPECT_EQ(convert::detect_format(dir.path()), convert::InputFormat::Unknown);  // no config.json yet
  testing::write_text(dir.file("config.json"), "{}");
  EXPECT_EQ(convert::detect_format(dir.path()), convert::InputFormat::HuggingFace);
  EXPECT_EQ(convert::detect_format(dir.file("config.json")), convert::InputFormat::HuggingFace);

  ConvertOptions o;
  o.require_tokenizer = false;
  auto ir = convert::import_model(dir.file("weights.bin"), o);
  ASSERT_TRUE(ir.ok()) << last_error_message();
  EXPECT_EQ(ir->source_format, "bitllama2c");
  EXPECT_EQ(convert::import_model(dir.file("other.dat"), o).error(), Error::BadMagic);
  EXPECT_NE(std::string(last_error_message()).find("other.dat"), std::string::npos);
  EXPECT_EQ(convert::import_model(dir.file("missing.bin"), o).error(), Error::FileNotFound);
  // Without a tokenizer.model beside it, the default options refuse to convert.
  EXPECT_FALSE(convert::import_model(dir.file("weights.bin"), ConvertOptions{}).ok());
}

#ifdef TERN_CONVERT_EXE
struct CommandResult {
  int rc;
  std::string output;
};
CommandResult run(const std::string& cmd) {
  CommandResult r{-1, ""};
  std::FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  r.rc = pclose(p);
  return r;
}

TEST(Cli, ConvertAndInspect) {
  TERN_REQUIRE_SHARED("models/bitllama2c-3M/bit_model.bin");
  testing::TempFile out(".tern");
  const CommandResult c = run(std::string(TERN_CONVERT_EXE) + " -q --embed q8 " +
                              testing::shared_path("models/bitllama2c-3M/bit_model.bin") + " -o " + out.path());
  ASSERT_EQ(c.rc, 0) << c.output;
  EXPECT_NE(c.output.find("embeddings (q8)"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("bits/weight"), std::string::npos) << c.output;
  auto b = Bundle::open(out.path().c_str());
  ASSERT_TRUE(b.ok()) << last_error_message();
  EXPECT_EQ(b->tensor("tok_embeddings")->dense_type, DenseType::Q8);
  const CommandResult i = run(std::string(TERN_INSPECT_EXE) + " " + out.path());
  ASSERT_EQ(i.rc, 0) << i.output;
  EXPECT_NE(i.output.find("bitllama2c"), std::string::npos);
  EXPECT_NE(i.output.find("layers.7.w_up"), std::string::npos);
}

// --ternary-packing base3 records t3_interleaved16 on every ternary tensor; tern-convert
// and tern-inspect say so; an unknown packing is refused.
TEST(Cli, ConvertBase3Packing) {
  TERN_REQUIRE_SHARED("models/bitllama2c-3M/bit_model.bin");
  testing::TempFile out(".tern");
  const std::string model = testing::shared_path("models/bitllama2c-3M/bit_model.bin");
  const CommandResult c =
      run(std::string(TERN_CONVERT_EXE) + " -q --ternary-packing base3 " + model + " -o " + out.path());
  ASSERT_EQ(c.rc, 0) << c.output;
  EXPECT_NE(c.output.find("ternary: t3_interleaved16"), std::string::npos) << c.output;
  auto b = Bundle::open(out.path().c_str());
  ASSERT_TRUE(b.ok()) << last_error_message();
  size_t ternary = 0;
  for (size_t i = 0; i < b->tensor_count(); ++i) {
    auto v = b->tensor_at(i);
    ASSERT_TRUE(v.ok());
    if (v->type != TensorType::Ternary) continue;
    EXPECT_EQ(v->layout, TernaryLayout::T3Interleaved16) << v->name;
    ++ternary;
  }
  EXPECT_GT(ternary, 0u);
  const CommandResult i = run(std::string(TERN_INSPECT_EXE) + " " + out.path());
  ASSERT_EQ(i.rc, 0) << i.output;
  EXPECT_NE(i.output.find("bits/weight, t3_interleaved16)"), std::string::npos) << i.output;
  EXPECT_NE(i.output.find("layout=t3_interleaved16"), std::string::npos) << i.output;
  const CommandResult bad =
      run(std::string(TERN_CONVERT_EXE) + " -q --ternary-packing base4 " + model + " -o " + out.path());
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.output.find("base4"), std::string::npos) << bad.output;
}

TEST(Cli, BadInputExitsNonZeroNamingTheFile) {
  testing::TempFile junk(".bin");
  junk.write(std::vector<uint8_t>(64, 0x5a));
  testing::TempFile out(".tern");
  const CommandResult c = run(std::string(TERN_CONVERT_EXE) + " " + junk.path() + " -o " + out.path());
  EXPECT_NE(c.rc, 0);
  EXPECT_NE(c.output.find(junk.path()), std::string::npos) << c.output;
  const CommandResult i = run(std::string(TERN_INSPECT_EXE) + " " + junk.path());
  EXPECT_NE(i.rc, 0);
  EXPECT_NE(i.output.find(junk.path()), std::string::npos) << i.output;
}
#endif

}  // namespace
}  // namespace tern
