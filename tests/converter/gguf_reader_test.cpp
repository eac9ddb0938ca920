// The GGUF reader against files written byte by byte (tests/support/gguf_builder.h) and
// against corrupt variants of them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "converter/import/gguf.h"
#include "tests/support/gguf_builder.h"
#include "tests/support/test_util.h"

namespace tern::convert::gguf {
namespace {

namespace fx = tern::testing::gguf_fixture;

// A file exercising every value type, an array of arrays, a custom alignment and two tensors.
std::vector<uint8_t> all_types_file(fx::Builder* b_out = nullptr) {
  fx::Builder b;
  b.alignment = 64;
  b.kv("general.alignment", fx::kU32, fx::Bytes().put<uint32_t>(64));
  b.kv("u8", fx::kU8, fx::Bytes().put<uint8_t>(200));
  b.kv("i8", fx::kI8, fx::Bytes().put<int8_t>(-100));
  b.kv("u16", fx::kU16, fx::Bytes().put<uint16_t>(60000));
  b.kv("i16", fx::kI16, fx::Bytes().put<int16_t>(-30000));
  b.kv("u32", fx::kU32, fx::Bytes().put<uint32_t>(4000000000u));
  b.kv("i32", fx::kI32, fx::Bytes().put<int32_t>(-2000000000));
  b.kv("f32", fx::kF32, fx::Bytes().put<float>(0.25f));
  b.kv("bool", fx::kBool, fx::Bytes().put<uint8_t>(1));
  b.kv("string", fx::kString, fx::Bytes().str("héllo"));
  b.kv("u64", fx::kU64, fx::Bytes().put<uint64_t>(1ull << 40));
  b.kv("i64", fx::kI64, fx::Bytes().put<int64_t>(-(1ll << 40)));
  b.kv("f64", fx::kF64, fx::Bytes().put<double>(1e-300));
  b.kv_strs("strings", {"a", "", "ccc"});
  b.kv_i32s("ints", {3, -4, 5});
  b.kv_f32s("floats", {0.5f, -1.5f});
  // [[1, 2], []] as an array of u16 arrays.
  b.kv("nested", fx::kArray,
       fx::Bytes()
           .put<uint32_t>(fx::kArray)
           .put<uint64_t>(2)
           .put<uint32_t>(fx::kU16)
           .put<uint64_t>(2)
           .put<uint16_t>(1)
           .put<uint16_t>(2)
           .put<uint32_t>(fx::kU16)
           .put<uint64_t>(0));
  b.tensor("vec", {3}, fx::kTypeF32, fx::f32_payload({1.0f, 2.0f, 3.0f}));
  b.tensor("mat", {2, 2}, fx::kTypeF16, fx::f16_payload({1.0f, -2.0f, 0.5f, 0.0f}));
  auto bytes = b.build();
  if (b_out != nullptr) *b_out = b;
  return bytes;
}

TEST(GgufReader, ReadsEveryValueTypeAndTensorInfo) {
  fx::Builder b;
  const auto bytes = all_types_file(&b);
  auto parsed = File::parse(bytes.data(), bytes.size(), "fixture.gguf");
  ASSERT_TRUE(parsed.ok()) << last_error_message();
  const File& f = *parsed;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.metadata().size(), 17u);
  EXPECT_EQ(f.metadata()[1].key, "u8");  // file order kept

  EXPECT_EQ(*f.get_uint("u8"), 200u);
  EXPECT_EQ(*f.get_int("i8"), -100);
  EXPECT_EQ(*f.get_uint("u16"), 60000u);
  EXPECT_EQ(*f.get_int("i16"), -30000);
  EXPECT_EQ(*f.get_uint("u32"), 4000000000u);
  EXPECT_EQ(*f.get_int("i32"), -2000000000);
  EXPECT_EQ(*f.get_float("f32"), 0.25);
  EXPECT_TRUE(*f.get_bool("bool"));
  EXPECT_EQ(*f.get_string("string"), "héllo");
  EXPECT_EQ(*f.get_uint("u64"), 1ull << 40);
  EXPECT_EQ(*f.get_int("i64"), -(1ll << 40));
  EXPECT_EQ(*f.get_float("f64"), 1e-300);
  EXPECT_EQ(*f.get_string_array("strings"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(*f.get_number_array("ints"), (std::vector<double>{3, -4, 5}));
  EXPECT_EQ(*f.get_number_array("floats"), (std::vector<double>{0.5, -1.5}));
  EXPECT_EQ(f.get_number_array("strings").error(), Error::InvalidArgument);
  EXPECT_EQ(f.get_string_array("ints").error(), Error::InvalidArgument);
  const Value* nested = f.find("nested");
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->items.size(), 2u);
  EXPECT_EQ(nested->count, 2u);
  EXPECT_EQ(nested->element_type, ValueType::Array);
  ASSERT_TRUE(nested->items[0].is_numeric_array());
  ASSERT_EQ(nested->items[0].count, 2u);
  EXPECT_EQ(nested->items[0].number_at(0), 1.0);
  EXPECT_EQ(nested->items[0].number_at(1), 2.0);
  EXPECT_EQ(nested->items[1].count, 0u);

  // Wrong-type and missing lookups are errors naming the file and key.
  EXPECT_EQ(f.get_string("u8").error(), Error::InvalidArgument);
  EXPECT_NE(std::string(last_error_message()).find("fixture.gguf"), std::string::npos);
  EXPECT_EQ(f.get_uint("i8").error(), Error::InvalidArgument);
  EXPECT_EQ(f.get_uint("absent").error(), Error::NotFound);
  EXPECT_NE(std::string(last_error_message()).find("absent"), std::string::npos);

  ASSERT_EQ(f.tensors().size(), 2u);
  const TensorInfo& vec = f.tensors()[0];
  EXPECT_EQ(vec.name, "vec");
  EXPECT_EQ(vec.dims, (std::vector<uint64_t>{3}));
  EXPECT_EQ(vec.bytes, 12u);
  const TensorInfo* mat = f.find_tensor("mat");
  ASSERT_NE(mat, nullptr);
  EXPECT_EQ(mat->dims, (std::vector<uint64_t>{2, 2}));
  EXPECT_EQ(mat->type(), TensorType::F16);
  EXPECT_EQ(mat->offset, 64u);  // 12 bytes padded to the 64-byte alignment
  EXPECT_EQ(f.data_offset(), b.data_offset);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(vec.data, bytes.data() + b.data_offset);
  EXPECT_EQ(mat->data, bytes.data() + b.data_offset + 64);
  float first;
  std::memcpy(&first, vec.data + 8, 4);
  EXPECT_EQ(first, 3.0f);
}

TEST(GgufReader, AcceptsVersion2AndDefaultsAlignmentTo32) {
  fx::Builder b;
  b.version = 2;
  b.kv_u32("x", 7);
  b.tensor("t", {5}, fx::kTypeF32, fx::f32_payload({1, 2, 3, 4, 5}));
  b.tensor("u", {1}, fx::kTypeF32, fx::f32_payload({9}));
  const auto bytes = b.build();
  auto f = File::parse(bytes.data(), bytes.size(), "v2.gguf");
  ASSERT_TRUE(f.ok()) << last_error_message();
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->data_offset() % 32, 0u);
  EXPECT_EQ(f->tensors()[1].offset, 32u);
}

// Every failure names the file and is a clean error.
void expect_rejected(const std::vector<uint8_t>& bytes, Error code, const std::string& words) {
  clear_last_error();
  testing::expect_failure(File::parse(bytes.data(), bytes.size(), "bad.gguf"), code, {"bad.gguf", words});
}

TEST(GgufReader, RejectsEveryTruncation) {
  fx::Builder b;
  const auto bytes = all_types_file(&b);
  // The last tensor ("mat", 4 f16 at data offset 64) ends before the trailing padding:
  // every shorter prefix is missing something, every longer one is a whole file.
  const size_t needed = b.data_offset + 64 + 8;
  for (size_t n = needed; n <= bytes.size(); ++n) {
    EXPECT_TRUE(File::parse(bytes.data(), n, "whole.gguf").ok()) << n << ": " << last_error_message();
  }
  for (size_t n = 0; n < needed; ++n) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + n);
    clear_last_error();
    auto f = File::parse(prefix.data(), prefix.size(), "cut.gguf");
    ASSERT_FALSE(f.ok()) << "prefix of " << n << " bytes accepted";
    EXPECT_EQ(f.error(), Error::Truncated) << n << ": " << last_error_message();
    EXPECT_NE(std::string(last_error_message()).find("cut.gguf"), std::string::npos);
  }
}

TEST(GgufReader, RejectsWrongMagicAndVersions) {
  auto bytes = all_types_file();
  bytes[0] = 'X';
  expect_rejected(bytes, Error::BadMagic, "not a GGUF file");
  for (uint32_t version : {0u, 1u, 4u, 0xffffffffu}) {
    auto v = all_types_file();
    std::memcpy(&v[4], &version, 4);
    expect_rejected(v, Error::VersionMismatch, "version " + std::to_string(version));
  }
  auto big_endian = all_types_file();
  const uint8_t v3_be[4] = {0, 0, 0, 3};
  std::memcpy(&big_endian[4], v3_be, 4);
  expect_rejected(big_endian, Error::NotSupported, "big-endian GGUF");
}

TEST(GgufReader, RejectsHugeCountsAndLengths) {
  auto with_u64_at = [](size_t pos, uint64_t value) {
    auto v = all_types_file();
    std::memcpy(&v[pos], &value, 8);
    return v;
  };
  expect_rejected(with_u64_at(8, 1ull << 60), Error::Truncated, "tensor infos cannot fit");
  expect_rejected(with_u64_at(16, 1ull << 60), Error::Truncated, "metadata entries cannot fit");
  expect_rejected(with_u64_at(24, ~0ull), Error::Truncated, "a metadata key");  // first key's length

  // An array claiming 2^40 elements, and a string value claiming 2^62 bytes.
  fx::Builder a;
  a.kv("arr", fx::kArray, fx::Bytes().put<uint32_t>(fx::kU32).put<uint64_t>(1ull << 40).put<uint32_t>(1));
  expect_rejected(a.build(), Error::OutOfRange, "array of 1099511627776 u32");
  fx::Builder s;
  s.kv("s", fx::kString, fx::Bytes().put<uint64_t>(1ull << 62));
  expect_rejected(s.build(), Error::Truncated, "a string value");
  // Tensor dims whose product overflows.
  fx::Builder d;
  d.tensor("t", {1ull << 40, 1ull << 40}, fx::kTypeF32, {});
  expect_rejected(d.build(), Error::OutOfRange, "too many elements");
}

TEST(GgufReader, RejectsBadTypesShapesAndOffsets) {
  fx::Builder t;
  t.tensor("t", {4}, 99, std::vector<uint8_t>(16));
  expect_rejected(t.build(), Error::UnsupportedType, "unknown GGML type 99");

  fx::Builder vt;
  vt.kv("k", 13, fx::Bytes().put<uint32_t>(0));
  expect_rejected(vt.build(), Error::CorruptFile, "unknown value type 13");

  fx::Builder blocks;  // tq2_0 rows must be whole 256-weight blocks
  blocks.tensor("t", {100}, fx::kTypeTQ2_0, std::vector<uint8_t>(66));
  expect_rejected(blocks.build(), Error::ShapeMismatch, "256-element blocks");

  fx::Builder dims;
  dims.tensor("t", {1, 1, 1, 1, 1}, fx::kTypeF32, std::vector<uint8_t>(4));
  expect_rejected(dims.build(), Error::ShapeMismatch, "5 dimensions");

  fx::Builder align;
  align.kv("general.alignment", fx::kU32, fx::Bytes().put<uint32_t>(24));
  expect_rejected(align.build(), Error::CorruptFile, "not a power of two");

  fx::Builder dup;
  dup.kv_u32("k", 1).kv_u32("k", 2);
  expect_rejected(dup.build(), Error::CorruptFile, "duplicate metadata key 'k'");

  fx::Builder dup_t;
  dup_t.tensor("t", {1}, fx::kTypeF32, fx::f32_payload({1})).tensor("t", {1}, fx::kTypeF32, fx::f32_payload({1}));
  expect_rejected(dup_t.build(), Error::CorruptFile, "duplicate tensor 't'");

  fx::Builder bools;
  bools.kv("b", fx::kArray,
           fx::Bytes().put<uint32_t>(fx::kBool).put<uint64_t>(3).put<uint8_t>(1).put<uint8_t>(0).put<uint8_t>(9));
  expect_rejected(bools.build(), Error::CorruptFile, "bool element 2 is 9");

  fx::Builder boolean;
  boolean.kv("b", fx::kBool, fx::Bytes().put<uint8_t>(2));
  expect_rejected(boolean.build(), Error::CorruptFile, "bool value 2");
}

TEST(GgufReader, RejectsMisalignedOffsetAndDataPastEof) {
  fx::Builder b;
  b.tensor("a", {4}, fx::kTypeF32, fx::f32_payload({1, 2, 3, 4}));
  b.tensor("b", {4}, fx::kTypeF32, fx::f32_payload({5, 6, 7, 8}));
  const auto good = b.build();
  ASSERT_TRUE(File::parse(good.data(), good.size(), "ok.gguf").ok()) << last_error_message();
  // Header (24 bytes), tensor "a"'s info (name 8+1, n_dims 4, dim 8, type 4, offset 8), then
  // tensor "b"'s name, n_dims, dim and type come before its offset field.
  const size_t b_offset_field = 24 + (9 + 4 + 8 + 4 + 8) + (9 + 4 + 8 + 4);
  uint64_t stored;
  std::memcpy(&stored, &good[b_offset_field], 8);
  ASSERT_EQ(stored, 32u);

  auto misaligned = good;
  const uint64_t off = 36;
  std::memcpy(&misaligned[b_offset_field], &off, 8);
  expect_rejected(misaligned, Error::CorruptFile, "not a multiple of the alignment");

  auto past = good;
  const uint64_t far = 1ull << 20;
  std::memcpy(&past[b_offset_field], &far, 8);
  expect_rejected(past, Error::Truncated, "runs past the end");

  auto wrapping = good;  // offset + size overflowing 64 bits must not wrap around
  const uint64_t huge = ~uint64_t{31};
  std::memcpy(&wrapping[b_offset_field], &huge, 8);
  expect_rejected(wrapping, Error::Truncated, "runs past the end");
}

TEST(GgufReader, OpenNamesMissingFile) {
  auto f = File::open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(std::string(last_error_message()).find("/nonexistent/dir/model.gguf"), std::string::npos);
}

TEST(GgufReader, ParsesSharedFiles) {
  const char* kFiles[] = {"tiny-f16.gguf", "tiny-tq2_0.gguf", "tiny-tq1_0.gguf", "tiny-b158-i2_s.gguf"};
  for (const char* name : kFiles) {
    const std::string rel = std::string("models/synthetic-tiny-gguf/") + name;
    TERN_REQUIRE_SHARED(rel);
    auto f = File::open(tern::testing::shared_path(rel));
    ASSERT_TRUE(f.ok()) << last_error_message();
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->tensors().size(), 46u);  // embeddings, final norm, 4 layers x 11
    EXPECT_EQ(*f->get_uint("tokenizer.ggml.bos_token_id"), 509u);
    EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens")->size(), 512u);
  }
}

}  // namespace
}  // namespace tern::convert::gguf
