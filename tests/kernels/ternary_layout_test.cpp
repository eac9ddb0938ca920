#include "kernels/ternary_layout.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/support/test_util.h"

namespace tern {
namespace {

TEST(TernaryLayout, PackedSizes) {
  EXPECT_EQ(ternary_packed_size(TernaryLayout::T2RowMajor, 3, 5), 3u * 2u);
  // 16-row blocks x 16-column tiles of 64 bytes, both dimensions padded up.
  EXPECT_EQ(ternary_packed_size(TernaryLayout::T2Interleaved16, 16, 16), 64u);
  EXPECT_EQ(ternary_packed_size(TernaryLayout::T2Interleaved16, 17, 16), 128u);
  EXPECT_EQ(ternary_packed_size(TernaryLayout::T2Interleaved16, 1, 17), 128u);
  EXPECT_EQ(ternary_packed_size(TernaryLayout::T2Interleaved16, 2560, 6912), 2560u * 6912u / 4u);
  EXPECT_EQ(ternary_packed_size(TernaryLayout::T2Interleaved16, SIZE_MAX / 2, SIZE_MAX / 2), 0u);
  // Base-3: 16-row blocks x 20-column tiles of 64 bytes.
  EXPECT_EQ(ternary_packed_size(TernaryLayout::T3Interleaved16, 16, 20), 64u);
  EXPECT_EQ(ternary_packed_size(TernaryLayout::T3Interleaved16, 16, 21), 128u);
  EXPECT_EQ(ternary_packed_size(TernaryLayout::T3Interleaved16, 2560, 2560), 2560u / 16u * 128u * 64u);
  EXPECT_EQ(ternary_packed_size(TernaryLayout::T3Interleaved16, SIZE_MAX / 2, SIZE_MAX / 2), 0u);
}

TEST(TernaryLayout, DefaultIsInterleaved) {
  EXPECT_EQ(ternary_default_layout(), TernaryLayout::T2Interleaved16);
  EXPECT_TRUE(is_known_layout(static_cast<uint32_t>(ternary_default_layout())));
  EXPECT_FALSE(is_known_layout(0));
  EXPECT_TRUE(is_known_layout(3));  // T3Interleaved16: ids are stored in bundles, never renumbered
  EXPECT_EQ(static_cast<uint32_t>(TernaryLayout::T3Interleaved16), 3u);
  EXPECT_STREQ(to_string(TernaryLayout::T3Interleaved16), "t3_interleaved16");
  EXPECT_FALSE(is_known_layout(4));
}

// Positions computed by hand from the diagram in ternary_layout.h.
TEST(TernaryLayout, Interleaved16HandFixture) {
  const size_t rows = 32, cols = 32;
  std::vector<int8_t> codes(rows * cols, 0);
  codes[5 * cols + 9] = 1;     // block 0, tile 0: byte 4*5 + 1 = 21, plane 2 (bits 4-5)
  codes[17 * cols + 20] = -1;  // block 1, tile 1: byte 64*3 + 4*1 + 0 = 196, plane 1 (bits 2-3)
  std::vector<uint8_t> packed(ternary_packed_size(TernaryLayout::T2Interleaved16, rows, cols));
  ASSERT_EQ(packed.size(), 256u);
  ASSERT_EQ(ternary_pack(TernaryLayout::T2Interleaved16, codes.data(), rows, cols, packed.data(), packed.size()),
            Error::Ok);
  for (size_t i = 0; i < packed.size(); ++i) {
    const uint8_t expected = i == 21 ? 0x65 : (i == 196 ? 0x51 : 0x55);
    EXPECT_EQ(packed[i], expected) << "byte " << i;
  }
}

TEST(TernaryLayout, RowMajorHandFixture) {
  const int8_t codes[5] = {-1, 0, 1, 1, -1};
  uint8_t packed[2] = {0, 0};
  ASSERT_EQ(ternary_pack(TernaryLayout::T2RowMajor, codes, 1, 5, packed, 2), Error::Ok);
  EXPECT_EQ(packed[0], 0b10100100);
  EXPECT_EQ(packed[1], 0b01010100);  // column 4 = -1, three padding zeros
}

TEST(TernaryLayout, RoundTripsEveryLayout) {
  const std::pair<size_t, size_t> shapes[] = {{1, 1}, {1, 17}, {15, 15}, {16, 16}, {17, 33}, {33, 100}, {64, 2560}};
  for (TernaryLayout layout :
       {TernaryLayout::T2RowMajor, TernaryLayout::T2Interleaved16, TernaryLayout::T3Interleaved16}) {
    for (auto [rows, cols] : shapes) {
      const auto codes = testing::random_ternary_codes(rows * cols, static_cast<uint32_t>(rows * 131 + cols));
      std::vector<uint8_t> packed(ternary_packed_size(layout, rows, cols));
      ASSERT_EQ(ternary_pack(layout, codes.data(), rows, cols, packed.data(), packed.size()), Error::Ok);
      std::vector<int8_t> back(rows * cols, 7);
      ASSERT_EQ(ternary_unpack(layout, packed.data(), packed.size(), rows, cols, back.data()), Error::Ok);
      EXPECT_EQ(back, codes) << to_string(layout) << " " << rows << "x" << cols;
    }
  }
}

TEST(TernaryLayout, RejectsBadInput) {
  const int8_t bad[4] = {0, 1, 2, -1};
  uint8_t out[64];
  EXPECT_EQ(ternary_pack(TernaryLayout::T2Interleaved16, bad, 1, 4, out, sizeof out), Error::InvalidArgument);
  EXPECT_EQ(ternary_pack(TernaryLayout::T2Interleaved16, nullptr, 1, 4, out, sizeof out), Error::InvalidArgument);
  const int8_t ok[4] = {0, 1, 0, -1};
  EXPECT_EQ(ternary_pack(TernaryLayout::T2Interleaved16, ok, 1, 4, out, 63), Error::InvalidArgument);
  EXPECT_EQ(ternary_pack(static_cast<TernaryLayout>(9), ok, 1, 4, out, sizeof out), Error::UnsupportedType);
  uint8_t corrupt[64];
  for (auto& b : corrupt) b = 0x55;
  corrupt[4 * 0 + 2] = 0x57;  // row 0, column 2 holds the invalid value 3
  int8_t codes[4];
  EXPECT_EQ(ternary_unpack(TernaryLayout::T2Interleaved16, corrupt, 64, 1, 4, codes), Error::InvalidBundle);
  EXPECT_EQ(ternary_unpack(TernaryLayout::T2Interleaved16, corrupt, 63, 1, 4, codes), Error::Truncated);
  // Base-3 goes through the same checks (t3i_pack / t3i_unpack).
  EXPECT_EQ(ternary_pack(TernaryLayout::T3Interleaved16, bad, 1, 4, out, sizeof out), Error::InvalidArgument);
  EXPECT_EQ(ternary_pack(TernaryLayout::T3Interleaved16, ok, 1, 4, out, 63), Error::InvalidArgument);
  corrupt[2] = 1;  // no base-3 value encodes to 1
  EXPECT_EQ(ternary_unpack(TernaryLayout::T3Interleaved16, corrupt, 64, 1, 4, codes), Error::InvalidBundle);
  EXPECT_EQ(ternary_unpack(TernaryLayout::T3Interleaved16, corrupt, 63, 1, 4, codes), Error::Truncated);
}

}  // namespace
}  // namespace tern
