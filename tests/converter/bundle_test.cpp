// The bundle writer and the verifying loader: round trip of every tensor kind, and
// rejection (never a crash) of truncated, bit-flipped, and inconsistent bundles.
#include <flatbuffers/flatbuffers.h>

#include <cstdlib>
#include <cstring>

#include "converter/import/synthetic.h"
#include "converter/writer/bundle_writer.h"
#include "fixtures.h"
#include "kernels/dense_matmul.h"
#include "kernels/ternary_layout.h"
#include "runtime/model/bundle.h"
#include "schema/bundle_generated.h"
#include "tests/support/test_util.h"

namespace tern {
namespace {

using convert::ConvertOptions;
using testing::tiny_model_ir;

bool slow_emulation() { return std::getenv("TERN_SLOW_EMULATION") != nullptr; }

// A 64-byte aligned copy of a bundle, as a mapping would be.
struct Buffer {
  struct alignas(64) Line {
    uint8_t b[64];
  };
  std::vector<Line> lines;
  size_t size = 0;
  explicit Buffer(const std::vector<uint8_t>& bytes, size_t n) : lines(n / 64 + 1), size(n) {
    if (n) std::memcpy(lines.data(), bytes.data(), n);
  }
  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(lines.data()); }
};

std::vector<uint8_t> write_to_bytes(const convert::BundleContents& contents) {
  testing::TempFile file(".tern");
  auto stats = convert::write_bundle(file.path(), contents);
  EXPECT_TRUE(stats.ok()) << last_error_message();
  return testing::read_file_bytes(file.path());
}

std::vector<uint8_t> tiny_bundle_bytes(DenseType embed = DenseType::F16) {
  static convert::ModelIR ir = tiny_model_ir();
  ConvertOptions o;
  o.embed_type = embed;
  o.embed_group = 4;
  return write_to_bytes(convert::contents_from_ir(ir, o));
}

TEST(Bundle, RoundTripsEveryTensor) {
  const convert::ModelIR ir = tiny_model_ir();
  testing::TempFile file(".tern");
  ConvertOptions o;
  o.embed_type = DenseType::F32;
  ASSERT_TRUE(convert::write_bundle(file.path(), convert::contents_from_ir(ir, o)).ok()) << last_error_message();
  auto b = Bundle::open(file.path().c_str());
  ASSERT_TRUE(b.ok()) << last_error_message();
  EXPECT_EQ(b->format_version(), 1u);
  EXPECT_EQ(b->tensor_count(), ir.tensors.size());
  EXPECT_EQ(b->config().hidden, 8u);
  EXPECT_EQ(b->config().ffn_hidden, 12u);
  EXPECT_EQ(b->config().kv_heads, 1u);
  EXPECT_EQ(b->config().family, ModelFamily::Bitnet2B4T);
  EXPECT_TRUE(b->config().has_sub_norms);
  EXPECT_EQ(b->config().bos_id, 3);
  for (const auto& t : ir.tensors) {
    auto v = b->tensor(t.name.c_str());
    ASSERT_TRUE(v.ok()) << t.name;
    ASSERT_EQ(v->ndim, t.shape.size());
    for (size_t d = 0; d < t.shape.size(); ++d) EXPECT_EQ(v->shape[d], t.shape[d]);
    // Zero-copy and aligned: the view points into the mapping at a 64-byte boundary.
    EXPECT_GE(v->data, b->data());
    EXPECT_LE(v->data + v->size_bytes, b->data() + b->file_size());
    EXPECT_EQ((v->data - b->data()) % 64, 0) << t.name;
    if (t.kind == convert::TensorKind::Ternary) {
      ASSERT_EQ(v->type, TensorType::Ternary);
      EXPECT_EQ(v->scale, t.scale);
      const TernaryMatrix m = v->as_ternary();
      ASSERT_EQ(ternary_matrix_validate(m), Error::Ok);
      std::vector<int8_t> codes(t.codes.size());
      ASSERT_EQ(ternary_unpack(m.layout, m.data, m.size_bytes, m.rows, m.cols, codes.data()), Error::Ok);
      for (uint64_t r = 0; r < t.shape[0]; ++r) {
        for (uint64_t c = 0; c < t.shape[1]; ++c) {
          // Expectation from the fixture formula, not from the IR the writer read.
          ASSERT_EQ(codes[r * t.shape[1] + c], t.codes[r * t.shape[1] + c]) << t.name << " " << r << "," << c;
        }
      }
    } else {
      ASSERT_EQ(v->type, TensorType::Dense);
      EXPECT_EQ(v->dense_type, DenseType::F32);
      ASSERT_EQ(v->size_bytes, t.values.size() * 4);
      EXPECT_EQ(std::memcmp(v->data, t.values.data(), v->size_bytes), 0) << t.name;
    }
  }
  auto lt = b->layer_tensor(0, "w_down");
  ASSERT_TRUE(lt.ok());
  EXPECT_STREQ(lt->name, "layers.0.w_down");
  EXPECT_EQ(b->tensor("layers.0.nope").error(), Error::UnknownTensor);
  EXPECT_NE(std::string(last_error_message()).find("layers.0.nope"), std::string::npos);
  EXPECT_FALSE(b->has_tensor("lm_head"));
  ASSERT_NE(b->tokenizer(), nullptr);
  EXPECT_EQ(b->tokenizer()->piece_offsets()->size(), 7u);
  EXPECT_EQ(b->tokenizer()->bos_id(), 3);
  EXPECT_EQ(b->kv_profile(), nullptr);
  EXPECT_STREQ(b->root()->provenance()->source_format()->c_str(), "fixture");
}

TEST(Bundle, EmbeddingTypesDecodeCloseToTheSource) {
  const convert::ModelIR ir = tiny_model_ir();
  const auto* emb = ir.find("tok_embeddings");
  // Tolerances: f16/bf16 round the fixture's quarter steps exactly; q8 is within half a
  // step of max|row group|/127, q4 within half a step of max/7.
  const struct {
    DenseType type;
    float tol;
  } cases[] = {{DenseType::F16, 0.0f}, {DenseType::BF16, 0.0f}, {DenseType::Q8, 1.0f / 127}, {DenseType::Q4, 1.0f / 7}};
  for (const auto& k : cases) {
    const auto bytes = tiny_bundle_bytes(k.type);
    Buffer buf(bytes, bytes.size());
    auto b = Bundle::from_memory(buf.data(), buf.size);
    ASSERT_TRUE(b.ok()) << last_error_message();
    auto v = b->tensor("tok_embeddings");
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->dense_type, k.type);
    const DenseMatrix m = v->as_dense();
    ASSERT_EQ(dense_matrix_validate(m), Error::Ok);
    std::vector<float> row(8);
    for (size_t r = 0; r < 6; ++r) {
      dense_row_f32(m, r, row.data());
      for (size_t c = 0; c < 8; ++c) EXPECT_NEAR(row[c], emb->values[r * 8 + c], k.tol) << to_string(k.type);
    }
  }
}

TEST(Bundle, KvProfileRoundTrips) {
  const convert::ModelIR ir = tiny_model_ir();
  auto contents = convert::contents_from_ir(ir, ConvertOptions{});
  convert::KvProfileIR kv;
  kv.sink_tokens = 4, kv.recent_window = 64, kv.group_size = 32, kv.average_bits = 3.5f, kv.provenance = "test";
  kv.heads.push_back({0, 0, 2.5f, 1.75f, 3, 4, 2, true, {0.5f, 0.25f, 0.125f, 0.0f}, {2.25f, 2.75f}});
  kv.sensitivity_widths = {2, 3, 4, 8};
  kv.sensitivity_tokens = 256;
  kv.value_group = 16;
  kv.allocations.push_back({2.5f, {3}, {2}, "sensitivity"});
  kv.allocations.push_back({4.0f, {0}, {0}, "uniform"});
  contents.kv_profile = kv;
  const auto bytes = write_to_bytes(contents);
  Buffer buf(bytes, bytes.size());
  auto b = Bundle::from_memory(buf.data(), buf.size);
  ASSERT_TRUE(b.ok()) << last_error_message();
  const schema::KvProfile* p = b->kv_profile();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->sink_tokens(), 4u);
  EXPECT_EQ(p->recent_window(), 64u);
  EXPECT_EQ(p->average_bits(), 3.5f);
  ASSERT_EQ(p->heads()->size(), 1u);
  EXPECT_EQ(p->heads()->Get(0)->class_(), schema::KvClass::Mixed);
  EXPECT_EQ(p->heads()->Get(0)->key_bits(), 4);
  EXPECT_TRUE(p->heads()->Get(0)->sink());
  // The calibration fields appended for adaptive:B.
  ASSERT_NE(p->heads()->Get(0)->sensitivity(), nullptr);
  ASSERT_EQ(p->heads()->Get(0)->sensitivity()->size(), 4u);
  EXPECT_EQ(p->heads()->Get(0)->sensitivity()->Get(1), 0.25f);
  ASSERT_EQ(p->heads()->Get(0)->query_shannon_entropy()->size(), 2u);
  EXPECT_EQ(p->heads()->Get(0)->query_shannon_entropy()->Get(1), 2.75f);
  ASSERT_EQ(p->sensitivity_widths()->size(), 4u);
  EXPECT_EQ(p->sensitivity_widths()->Get(3), 8);
  EXPECT_EQ(p->sensitivity_tokens(), 256u);
  EXPECT_EQ(p->value_group(), 16u);
  ASSERT_EQ(p->allocations()->size(), 2u);
  EXPECT_EQ(p->allocations()->Get(0)->average_bits(), 2.5f);
  EXPECT_EQ(p->allocations()->Get(0)->key_bits()->Get(0), 3);
  EXPECT_EQ(p->allocations()->Get(0)->value_bits()->Get(0), 2);
  EXPECT_STREQ(p->allocations()->Get(0)->rule()->c_str(), "sensitivity");
  EXPECT_STREQ(p->allocations()->Get(1)->rule()->c_str(), "uniform");

  // A profile naming a KV head the model does not have is rejected.
  contents.kv_profile->heads[0].kv_head = 1;
  const auto bad = write_to_bytes(contents);
  Buffer bad_buf(bad, bad.size());
  EXPECT_EQ(Bundle::from_memory(bad_buf.data(), bad_buf.size).error(), Error::InvalidBundle);
}

TEST(Bundle, TruncatedAtEveryByteIsRejected) {
  const auto bytes = tiny_bundle_bytes();
  ASSERT_GT(bytes.size(), 1000u);
  for (size_t n = 0; n < bytes.size(); ++n) {
    Buffer buf(bytes, n);
    auto b = Bundle::from_memory(buf.data(), n);
    ASSERT_FALSE(b.ok()) << "accepted a bundle truncated to " << n << " of " << bytes.size() << " bytes";
    ASSERT_EQ(b.error(), Error::Truncated) << n << ": " << last_error_message();
  }
  Buffer whole(bytes, bytes.size());
  EXPECT_TRUE(Bundle::from_memory(whole.data(), whole.size).ok()) << last_error_message();
}

TEST(Bundle, LargerBundleTruncatedAtSampledPointsIsRejected) {
  auto contents = convert::synthetic_contents("tiny", ConvertOptions{});
  ASSERT_TRUE(contents.ok());
  const auto bytes = write_to_bytes(*contents);
  ASSERT_GT(bytes.size(), 1000000u);
  const size_t samples = slow_emulation() ? 200 : 2000;
  uint64_t x = 12345;
  for (size_t i = 0; i < samples; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    // Half the points in the header, where the structure is.
    const size_t n = i % 2 ? (x >> 33) % bytes.size() : (x >> 33) % 16384;
    Buffer buf(bytes, n);
    auto b = Bundle::from_memory(buf.data(), n);
    ASSERT_FALSE(b.ok()) << n;
    ASSERT_EQ(b.error(), Error::Truncated) << n << ": " << last_error_message();
  }
}

// Every view the loader hands out must lie inside the buffer and pass the kernels' checks.
void expect_views_inside(const Bundle& b, const uint8_t* base, size_t size) {
  for (size_t i = 0; i < b.tensor_count(); ++i) {
    auto v = b.tensor_at(i);
    ASSERT_TRUE(v.ok());
    ASSERT_GE(v->data, base);
    ASSERT_LE(v->data + v->size_bytes, base + size);
    if (v->type == TensorType::Ternary) {
      ASSERT_EQ(ternary_matrix_validate(v->as_ternary()), Error::Ok) << v->name;
    } else {
      ASSERT_EQ(dense_matrix_validate(v->as_dense()), Error::Ok) << v->name;
    }
    auto again = b.tensor(v->name);
    ASSERT_TRUE(again.ok()) << v->name;
  }
}

TEST(Bundle, BitFlipWalkNeverCrashes) {
  const auto bytes = tiny_bundle_bytes(DenseType::Q8);
  uint32_t fb_size;
  std::memcpy(&fb_size, bytes.data(), 4);
  size_t rejected = 0, accepted = 0;
  const size_t stride = slow_emulation() ? 7 : 1;
  // Every byte of the header (one bit each, rotating) and a sample of the data area.
  for (size_t i = 0; i < bytes.size(); i += (i < fb_size + 4 ? stride : 61)) {
    std::vector<uint8_t> copy = bytes;
    copy[i] ^= static_cast<uint8_t>(1u << (i % 8));
    Buffer buf(copy, copy.size());
    auto b = Bundle::from_memory(buf.data(), buf.size);
    if (b.ok()) {
      ++accepted;
      expect_views_inside(*b, buf.data(), buf.size);
    } else {
      ++rejected;
      ASSERT_TRUE(is_known_error_code(static_cast<int32_t>(b.error())));
      ASSERT_NE(std::strlen(last_error_message()), 0u);
    }
  }
  EXPECT_GT(rejected, 0u);
  EXPECT_GT(accepted, 0u);  // flips in weights and padding are not detectable, only harmless
}

TEST(Bundle, WrongIdentifierAndVersion) {
  auto bytes = tiny_bundle_bytes();
  {
    auto copy = bytes;
    std::memcpy(copy.data() + 8, "GGUF", 4);
    Buffer buf(copy, copy.size());
    EXPECT_EQ(Bundle::from_memory(buf.data(), buf.size).error(), Error::BadIdentifier);
  }
  {
    // Patch format_version through the table's vtable: a future version must be refused.
    auto copy = bytes;
    auto* root =
        reinterpret_cast<const flatbuffers::Table*>(flatbuffers::GetSizePrefixedRoot<schema::Bundle>(copy.data()));
    const uint8_t* field = root->GetAddressOf(schema::Bundle::VT_FORMAT_VERSION);
    ASSERT_NE(field, nullptr);
    const uint32_t two = 2;
    std::memcpy(copy.data() + (field - copy.data()), &two, 4);
    Buffer buf(copy, copy.size());
    EXPECT_EQ(Bundle::from_memory(buf.data(), buf.size).error(), Error::VersionMismatch);
    EXPECT_NE(std::string(last_error_message()).find("version 2"), std::string::npos) << last_error_message();
  }
  testing::TempFile not_bundle(".tern");
  not_bundle.write(std::vector<uint8_t>(100, 0x41));
  auto r = Bundle::open(not_bundle.path().c_str());
  EXPECT_EQ(r.error(), Error::BadIdentifier);
  EXPECT_NE(std::string(last_error_message()).find(not_bundle.path()), std::string::npos);
  EXPECT_EQ(Bundle::open("/nonexistent/x.tern").error(), Error::FileNotFound);
}

TEST(Bundle, InconsistentContentsAreRejected) {
  {
    convert::ModelIR ir = tiny_model_ir();
    ir.tensors.erase(ir.tensors.begin() + 9);  // layers.0.w_up
    ASSERT_EQ(ir.find("layers.0.w_up"), nullptr);
    const auto bytes = write_to_bytes(convert::contents_from_ir(ir, ConvertOptions{}));
    Buffer buf(bytes, bytes.size());
    EXPECT_EQ(Bundle::from_memory(buf.data(), buf.size).error(), Error::UnknownTensor);
    EXPECT_NE(std::string(last_error_message()).find("layers.0.w_up"), std::string::npos);
  }
  {
    convert::ModelIR ir = tiny_model_ir();
    ir.config.ffn_hidden = 16;  // the matrices say 12
    const auto bytes = write_to_bytes(convert::contents_from_ir(ir, ConvertOptions{}));
    Buffer buf(bytes, bytes.size());
    EXPECT_EQ(Bundle::from_memory(buf.data(), buf.size).error(), Error::ShapeMismatch);
  }
  {
    convert::ModelIR ir = tiny_model_ir();
    ir.config.tied_embeddings = false;  // then lm_head is required
    const auto bytes = write_to_bytes(convert::contents_from_ir(ir, ConvertOptions{}));
    Buffer buf(bytes, bytes.size());
    EXPECT_EQ(Bundle::from_memory(buf.data(), buf.size).error(), Error::UnknownTensor);
  }
  {
    const convert::ModelIR ir = tiny_model_ir();  // the contents read from it while writing
    auto contents = convert::contents_from_ir(ir, ConvertOptions{});
    for (auto& t : contents.tensors) {
      if (t.name == "layers.0.wq") {
        t.layout = static_cast<TernaryLayout>(99);
        t.produce = [](convert::SegmentSink&, std::vector<float>&) { return Error::Ok; };
      }
    }
    const auto bytes = write_to_bytes(contents);
    Buffer buf(bytes, bytes.size());
    EXPECT_EQ(Bundle::from_memory(buf.data(), buf.size).error(), Error::UnsupportedType);
    EXPECT_NE(std::string(last_error_message()).find("99"), std::string::npos);
  }
}

TEST(Bundle, SyntheticPresetsHaveTheRealShapes) {
  // Shapes from ../shared/README.md.
  auto b = convert::synthetic_config("2b4t");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->hidden, 2560u);
  EXPECT_EQ(b->ffn_hidden, 6912u);
  EXPECT_EQ(b->layers, 30u);
  EXPECT_EQ(b->heads, 20u);
  EXPECT_EQ(b->kv_heads, 5u);
  EXPECT_EQ(b->head_dim, 128u);
  EXPECT_EQ(b->vocab, 128256u);
  EXPECT_EQ(b->rope_theta, 500000.0f);
  EXPECT_EQ(b->activation, Activation::Relu2);
  EXPECT_TRUE(b->tied_embeddings);
  auto large = convert::synthetic_config("large");
  ASSERT_TRUE(large.ok());
  EXPECT_EQ(large->hidden, 1536u);
  EXPECT_EQ(large->ffn_hidden, 4096u);
  EXPECT_EQ(large->layers, 24u);
  EXPECT_EQ(large->kv_heads, 16u);
  EXPECT_EQ(large->vocab, 32002u);
  EXPECT_EQ(large->activation, Activation::Silu);
  auto b3 = convert::synthetic_config("3b");
  ASSERT_TRUE(b3.ok());
  EXPECT_EQ(b3->hidden, 3200u);
  EXPECT_EQ(b3->ffn_hidden, 8640u);
  EXPECT_EQ(b3->layers, 26u);
  EXPECT_EQ(b3->heads, 32u);
  EXPECT_EQ(b3->head_dim, 100u);
  EXPECT_EQ(convert::synthetic_config("7b").error(), Error::InvalidArgument);
}

TEST(Bundle, SyntheticTinyIsSeededAndRunnable) {
  ConvertOptions o;
  auto c1 = convert::synthetic_contents("tiny", o);
  auto c2 = convert::synthetic_contents("tiny", o);
  o.seed = 99;
  auto c3 = convert::synthetic_contents("tiny", o);
  ASSERT_TRUE(c1.ok() && c2.ok() && c3.ok());
  const auto a = write_to_bytes(*c1), b = write_to_bytes(*c2), c = write_to_bytes(*c3);
  ASSERT_EQ(a.size(), b.size());
  // Identical except the creation timestamp in the header.
  uint32_t fb;
  std::memcpy(&fb, a.data(), 4);
  const size_t data_start = (fb + 4 + 63) / 64 * 64;
  EXPECT_EQ(std::memcmp(a.data() + data_start, b.data() + data_start, a.size() - data_start), 0);
  EXPECT_NE(std::memcmp(a.data() + data_start, c.data() + data_start, a.size() - data_start), 0);

  Buffer buf(a, a.size());
  auto bundle = Bundle::from_memory(buf.data(), buf.size);
  ASSERT_TRUE(bundle.ok()) << last_error_message();
  EXPECT_EQ(bundle->config().vocab, 512u);
  EXPECT_EQ(bundle->config().layers, 4u);
  EXPECT_EQ(bundle->tokenizer()->piece_offsets()->size(), 260u);  // 256 bytes + 3 specials
  // Codes are ternary with roughly the planned sparsity (P(0) = 1/2).
  auto wq = bundle->layer_tensor(2, "wq");
  ASSERT_TRUE(wq.ok());
  const TernaryMatrix m = wq->as_ternary();
  std::vector<int8_t> codes(m.rows * m.cols);
  ASSERT_EQ(ternary_unpack(m.layout, m.data, m.size_bytes, m.rows, m.cols, codes.data()), Error::Ok);
  size_t zeros = 0;
  for (int8_t v : codes) zeros += v == 0;
  EXPECT_NEAR(static_cast<double>(zeros) / codes.size(), 0.5, 0.02);
}

// uint64 offsets all the way: a bundle past 4 GiB (a sparse file, so the test is cheap)
// with the model's tensors placed after a 4 GiB filler.
TEST(Bundle, TensorsBeyond4GiBAreAddressed) {
  if (sizeof(size_t) < 8 || slow_emulation()) GTEST_SKIP() << "needs a 64-bit address space";
  const convert::ModelIR ir = tiny_model_ir();
  auto contents = convert::contents_from_ir(ir, ConvertOptions{});
  convert::TensorSpec filler;
  filler.name = "filler";
  filler.shape = {1, (1ull << 31) + 512};
  filler.dense_type = DenseType::F16;
  filler.produce = [&](convert::SegmentSink& sink, std::vector<float>&) {
    return sink.write_zeros(filler.data_size());
  };
  contents.tensors.insert(contents.tensors.begin(), filler);
  testing::TempFile file(".tern");
  auto stats = convert::write_bundle(file.path(), contents);
  ASSERT_TRUE(stats.ok()) << last_error_message();
  EXPECT_GT(stats->file_size, 1ull << 32);
  auto b = Bundle::open(file.path().c_str());
  ASSERT_TRUE(b.ok()) << last_error_message();
  EXPECT_EQ(b->file_size(), stats->file_size);
  auto f = b->tensor("filler");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->data[0], 0);
  EXPECT_EQ(f->data[f->size_bytes - 1], 0);
  const auto* t = ir.find("layers.0.w_down");
  auto v = b->tensor("layers.0.w_down");
  ASSERT_TRUE(v.ok());
  EXPECT_GT(static_cast<uint64_t>(v->data - b->data()), 1ull << 32);
  const TernaryMatrix m = v->as_ternary();
  std::vector<int8_t> codes(m.rows * m.cols);
  ASSERT_EQ(ternary_unpack(m.layout, m.data, m.size_bytes, m.rows, m.cols, codes.data()), Error::Ok);
  EXPECT_EQ(codes, t->codes);
  EXPECT_EQ(v->scale, t->scale);
}

// Inputs the bundle fuzzer once crashed on stay rejected (and clean under UBSan).
TEST(Bundle, FuzzRegressionsAreRejected) {
  const std::string path =
      std::string(TERN_SOURCE_DIR) + "/tests/fuzz/regressions/fuzz_bundle/misaligned-u64-shape.tern";
  const auto bytes = testing::read_file_bytes(path);
  ASSERT_FALSE(bytes.empty()) << path;
  Buffer buf(bytes, bytes.size());
  auto b = Bundle::from_memory(buf.data(), buf.size);
  EXPECT_EQ(b.error(), Error::InvalidBundle) << last_error_message();
}

}  // namespace
}  // namespace tern
