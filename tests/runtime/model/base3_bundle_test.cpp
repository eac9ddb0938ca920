// Base-3 bundles (tern-convert --ternary-packing base3) against the 2-bit bundles of the
// same models: the integer sums are identical, so the logits must be bit-identical and
// greedy decoding token-for-token the same. And a bundle naming a layout this runtime
// does not know is refused with a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kernels/ternary_layout.h"
#include "runtime/engine/model.h"
#include "runtime/engine/session.h"
#include "runtime/model/bundle.h"
#include "schema/bundle_generated.h"
#include "tests/support/bundle_util.h"

namespace tern {
namespace {

std::unique_ptr<Model> load(const std::string& name) {
  auto model = Model::load(testing::bundle_path(name).c_str(), ModelParams{});
  EXPECT_TRUE(model.ok()) << name << ": " << last_error_message();
  return model.ok() ? std::move(model).value() : nullptr;
}

// Bytes of every ternary tensor, and checks each is in `layout`.
uint64_t ternary_bytes_in(const std::string& name, TernaryLayout layout) {
  auto b = Bundle::open(testing::bundle_path(name).c_str());
  EXPECT_TRUE(b.ok()) << last_error_message();
  if (!b.ok()) return 0;
  uint64_t bytes = 0;
  for (size_t i = 0; i < b->tensor_count(); ++i) {
    auto v = b->tensor_at(i);
    EXPECT_TRUE(v.ok());
    if (!v.ok() || v->type != TensorType::Ternary) continue;
    EXPECT_EQ(v->layout, layout) << name << " " << v->name;
    bytes += v->size_bytes;
  }
  return bytes;
}

int32_t argmax(const float* x, size_t n) { return static_cast<int32_t>(std::max_element(x, x + n) - x); }

struct Base3Case {
  const char* two_bit;
  const char* base3;
  const char* shared_source;  // "" for the repository's tiny-austen
  const char* prompt;
};

class Base3Bundle : public ::testing::TestWithParam<Base3Case> {};

// The prompt through one prefill (the GEMM path), then 24 greedy decode steps (GEMV):
// every logit of every step equal to the bit.
TEST_P(Base3Bundle, GreedyDecodeIsBitIdenticalTo2Bit) {
  const Base3Case& c = GetParam();
  if (c.shared_source[0] != '\0') {
    TERN_REQUIRE_SHARED_BUNDLE(c.two_bit, c.shared_source);
    TERN_REQUIRE_SHARED_BUNDLE(c.base3, c.shared_source);
  }
  TERN_REQUIRE_BUNDLE(c.two_bit);
  TERN_REQUIRE_BUNDLE(c.base3);
  const uint64_t bytes2 = ternary_bytes_in(c.two_bit, TernaryLayout::T2Interleaved16);
  const uint64_t bytes3 = ternary_bytes_in(c.base3, TernaryLayout::T3Interleaved16);
  // 1.6 against 2 bits per weight, give or take the tiles' padding.
  EXPECT_LT(static_cast<double>(bytes3), 0.85 * static_cast<double>(bytes2)) << bytes3 << " vs " << bytes2;
  auto m2 = load(c.two_bit), m3 = load(c.base3);
  ASSERT_NE(m2, nullptr);
  ASSERT_NE(m3, nullptr);
  const uint32_t vocab = m2->config().vocab;
  ASSERT_EQ(m3->config().vocab, vocab);

  std::vector<int32_t> ids(64);
  auto n = m2->tokenizer()->encode(c.prompt, std::strlen(c.prompt), true, false, ids.data(), ids.size());
  ASSERT_TRUE(n.ok()) << last_error_message();
  ids.resize(*n);
  ASSERT_GE(ids.size(), 2u);
  auto s2 = m2->create_session(SamplerParams{}), s3 = m3->create_session(SamplerParams{});
  ASSERT_TRUE(s2.ok() && s3.ok()) << last_error_message();
  ASSERT_EQ((*s2)->prefill(ids.data(), ids.size()), Error::Ok) << last_error_message();
  ASSERT_EQ((*s3)->prefill(ids.data(), ids.size()), Error::Ok) << last_error_message();
  std::vector<int32_t> tokens2, tokens3;
  for (int step = 0; step < 24; ++step) {
    const float* l2 = (*s2)->logits();
    const float* l3 = (*s3)->logits();
    ASSERT_TRUE(l2 != nullptr && l3 != nullptr);
    ASSERT_EQ(std::memcmp(l2, l3, vocab * sizeof(float)), 0) << "logits differ at step " << step;
    tokens2.push_back(argmax(l2, vocab));
    tokens3.push_back(argmax(l3, vocab));
    ASSERT_EQ((*s2)->decode(tokens2.back()), Error::Ok) << last_error_message();
    ASSERT_EQ((*s3)->decode(tokens3.back()), Error::Ok) << last_error_message();
  }
  EXPECT_EQ(tokens3, tokens2);
  // Not a degenerate run: the continuation moves.
  EXPECT_GT(std::count_if(tokens2.begin(), tokens2.end(), [&](int32_t t) { return t != tokens2[0]; }), 0);
}

INSTANTIATE_TEST_SUITE_P(Models, Base3Bundle,
                         ::testing::Values(Base3Case{"tiny-austen-packed.tern", "tiny-austen-base3.tern", "",
                                                     "It is a truth universally acknowledged"},
                                           Base3Case{"bitllama2c-3M.tern", "bitllama2c-3M-base3.tern",
                                                     "models/bitllama2c-3M/bit_model.bin", "Once upon a time"}),
                         [](const auto& info) {
                           return info.index == 0 ? std::string("TinyAusten") : std::string("Bitllama2c");
                         });

// The base-3 bundle with one tensor's layout id patched in the FlatBuffer to an id no
// runtime knows (7): open refuses it, naming the tensor and the id.
TEST(Base3Bundle, UnknownLayoutIdIsRefused) {
  const std::string name = "tiny-austen-base3.tern";
  TERN_REQUIRE_BUNDLE(name);
  std::ifstream in(testing::bundle_path(name), std::ios::binary);
  std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(file.size(), 8u);
  // 8-byte aligned copy for from_memory.
  std::vector<uint64_t> storage((file.size() + 7) / 8);
  uint8_t* bytes = reinterpret_cast<uint8_t*>(storage.data());
  std::memcpy(bytes, file.data(), file.size());
  ASSERT_TRUE(Bundle::from_memory(bytes, file.size()).ok()) << last_error_message();

  const schema::Bundle* root = flatbuffers::GetSizePrefixedRoot<schema::Bundle>(bytes);
  std::string patched_name;
  for (const schema::Tensor* t : *root->tensors()) {
    if (t->type() != schema::TensorType::Ternary) continue;
    ASSERT_EQ(t->ternary_layout(), 3u);
    // A generated table is a flatbuffers::Table (privately): its vtable says where the field is.
    const uint8_t* field =
        reinterpret_cast<const flatbuffers::Table*>(t)->GetAddressOf(schema::Tensor::VT_TERNARY_LAYOUT);
    ASSERT_NE(field, nullptr);
    const uint32_t unknown = 7;
    std::memcpy(bytes + (field - bytes), &unknown, sizeof unknown);  // the same byte, writable
    patched_name = t->name()->str();
    break;
  }
  ASSERT_FALSE(patched_name.empty());
  auto refused = Bundle::from_memory(bytes, file.size());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error(), Error::UnsupportedType);
  const std::string message = last_error_message();
  EXPECT_NE(message.find("unknown ternary layout id 7"), std::string::npos) << message;
  EXPECT_NE(message.find(patched_name), std::string::npos) << message;
}

}  // namespace
}  // namespace tern
