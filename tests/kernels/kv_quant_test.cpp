#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dense_matmul.h"
#include "kernels/kv_quant.h"
#include "tests/support/kv_test_util.h"

namespace tern {
namespace {

using testing::kv_random_rows;

TEST(KvPackTest, HandPackedBitStreams) {
  // Code i sits at bits [i*bits, (i+1)*bits) of a little-endian stream.
  const uint8_t c3[8] = {1, 2, 3, 4, 5, 6, 7, 0};
  uint8_t p3[3];
  kv_pack_codes(c3, 8, 3, p3);
  // 1 + 2<<3 + 3<<6 + 4<<9 + 5<<12 + 6<<15 + 7<<18 = 0x1F58D1
  EXPECT_EQ(p3[0], 0xD1);
  EXPECT_EQ(p3[1], 0x58);
  EXPECT_EQ(p3[2], 0x1F);
  const uint8_t c2[4] = {1, 2, 3, 0};
  uint8_t p2[1];
  kv_pack_codes(c2, 4, 2, p2);
  EXPECT_EQ(p2[0], 0x39);  // 1 + 2<<2 + 3<<4
  const uint8_t c4[3] = {0xA, 0x5, 0xF};
  uint8_t p4[2];
  kv_pack_codes(c4, 3, 4, p4);
  EXPECT_EQ(p4[0], 0x5A);
  EXPECT_EQ(p4[1], 0x0F);
  EXPECT_EQ(kv_packed_bytes(3, 100), 38u);  // 300 bits
}

TEST(KvPackTest, RoundTripsEveryWidthAndLength) {
  std::mt19937 rng(7);
  for (uint32_t bits : {2u, 3u, 4u, 8u}) {
    for (size_t n = 1; n <= 70; ++n) {
      std::vector<uint8_t> codes(n), back(n);
      for (auto& c : codes) c = static_cast<uint8_t>(rng() & ((1u << bits) - 1));
      std::vector<uint8_t> packed(kv_packed_bytes(bits, n));
      kv_pack_codes(codes.data(), n, bits, packed.data());
      kv_unpack_codes(packed.data(), n, bits, back.data());
      ASSERT_EQ(codes, back) << bits << " bits, " << n << " codes";
    }
  }
}

TEST(KvQuantParamsTest, CoversTheRangeOutward) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-50.0f, 50.0f);
  for (int i = 0; i < 2000; ++i) {
    float lo = u(rng), hi = u(rng);
    if (lo > hi) std::swap(lo, hi);
    if (i % 10 == 0) hi = lo;  // constant channel
    for (uint32_t bits : {2u, 3u, 4u, 8u}) {
      uint16_t mh, sh;
      float mf, sf;
      kv_quant_params(lo, hi, bits, &mh, &sh, &mf, &sf);
      const float levels = static_cast<float>((1u << bits) - 1);
      EXPECT_LE(mf, lo);
      EXPECT_GE(mf + levels * sf, hi);
      EXPECT_EQ(f16_to_f32(mh), mf);
      EXPECT_EQ(f16_to_f32(sh), sf);
      // Outward rounding costs at most a couple of f16 ulps of the range.
      const double ideal = (static_cast<double>(hi) - mf) / levels;
      EXPECT_LE(sf, ideal * (1.0 + 1.0 / 512) + 1e-7) << lo << " " << hi << " " << bits;
    }
  }
}

struct Shape {
  uint32_t head_dim, block_tokens, group;
};
const Shape kShapes[] = {{64, 32, 32}, {100, 32, 32},  {128, 64, 64}, {32, 7, 8},
                         {20, 1, 16},  {128, 16, 128}, {3, 5, 8}};

class KvQuantIsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam(), cpu_features())) GTEST_SKIP() << to_string(GetParam()) << " not supported here";
  }
};

TEST_P(KvQuantIsaTest, KeyBlockBytesEqualScalar) {
  uint32_t seed = 1;
  for (const Shape& s : kShapes) {
    for (uint32_t bits : {2u, 3u, 4u, 8u}) {
      const auto keys = kv_random_rows(s.block_tokens, s.head_dim, seed++);
      const size_t bytes = kv_key_block_bytes(bits, s.head_dim, s.block_tokens);
      std::vector<uint8_t> want(bytes), got(bytes, 0xAB);
      kv_quantize_key_block(Isa::Scalar, keys.data(), s.block_tokens, s.head_dim, bits, want.data());
      kv_quantize_key_block(GetParam(), keys.data(), s.block_tokens, s.head_dim, bits, got.data());
      ASSERT_EQ(want, got) << "dim " << s.head_dim << " block " << s.block_tokens << " bits " << bits;
    }
  }
}

TEST_P(KvQuantIsaTest, ValueRowBytesEqualScalar) {
  uint32_t seed = 100;
  for (const Shape& s : kShapes) {
    for (uint32_t bits : {2u, 3u, 4u, 8u}) {
      const auto rows = kv_random_rows(9, s.head_dim, seed++);
      const size_t bytes = kv_value_row_bytes(bits, s.head_dim, s.group);
      for (uint32_t r = 0; r < 9; ++r) {
        std::vector<uint8_t> want(bytes), got(bytes, 0xCD);
        kv_quantize_value_row(Isa::Scalar, rows.data() + r * s.head_dim, s.head_dim, s.group, bits, want.data());
        kv_quantize_value_row(GetParam(), rows.data() + r * s.head_dim, s.head_dim, s.group, bits, got.data());
        ASSERT_EQ(want, got) << "dim " << s.head_dim << " group " << s.group << " bits " << bits;
      }
    }
  }
}

// Reads the stored f16 pair and codes back independently of the library's dequantizer
// and checks every element lies within half a step of its reconstruction.
TEST_P(KvQuantIsaTest, KeyErrorWithinHalfStep) {
  uint32_t seed = 200;
  for (const Shape& s : kShapes) {
    for (uint32_t bits : {2u, 3u, 4u, 8u}) {
      const auto keys = kv_random_rows(s.block_tokens, s.head_dim, seed++);
      std::vector<uint8_t> block(kv_key_block_bytes(bits, s.head_dim, s.block_tokens));
      kv_quantize_key_block(GetParam(), keys.data(), s.block_tokens, s.head_dim, bits, block.data());
      const size_t row_bytes = kv_packed_bytes(bits, s.head_dim);
      std::vector<float> deq(keys.size());
      kv_dequantize_key_block(block.data(), s.block_tokens, s.head_dim, bits, 0, s.block_tokens, deq.data());
      for (uint32_t c = 0; c < s.head_dim; ++c) {
        uint16_t mh, sh;
        std::memcpy(&mh, &block[2 * c], 2);
        std::memcpy(&sh, &block[2 * (s.head_dim + c)], 2);
        const double mn = f16_to_f32(mh), st = f16_to_f32(sh);
        for (uint32_t t = 0; t < s.block_tokens; ++t) {
          const uint8_t* row = block.data() + 4 * s.head_dim + t * row_bytes;
          const size_t bit = static_cast<size_t>(c) * bits;
          uint32_t code = 0;
          for (uint32_t b = 0; b < bits; ++b) code |= ((row[(bit + b) / 8] >> ((bit + b) % 8)) & 1u) << b;
          const double x = keys[t * s.head_dim + c], rec = mn + code * st;
          ASSERT_LE(std::fabs(x - rec), st / 2 * (1 + 1e-5) + 1e-6 * std::fabs(x))
              << "dim " << s.head_dim << " bits " << bits << " c " << c << " t " << t;
          ASSERT_NEAR(deq[t * s.head_dim + c], rec, 1e-6 * (1 + std::fabs(rec)));
        }
      }
    }
  }
}

TEST_P(KvQuantIsaTest, ValueErrorWithinHalfStep) {
  uint32_t seed = 300;
  for (const Shape& s : kShapes) {
    for (uint32_t bits : {2u, 3u, 4u, 8u}) {
      const auto v = kv_random_rows(1, s.head_dim, seed++);
      std::vector<uint8_t> row(kv_value_row_bytes(bits, s.head_dim, s.group));
      kv_quantize_value_row(GetParam(), v.data(), s.head_dim, s.group, bits, row.data());
      std::vector<float> deq(s.head_dim);
      kv_dequantize_value_row(row.data(), s.head_dim, s.group, bits, deq.data());
      const uint32_t groups = (s.head_dim + s.group - 1) / s.group;
      for (uint32_t c = 0; c < s.head_dim; ++c) {
        uint16_t mh, sh;
        std::memcpy(&mh, &row[4 * (c / s.group)], 2);
        std::memcpy(&sh, &row[4 * (c / s.group) + 2], 2);
        const double st = f16_to_f32(sh);
        ASSERT_LE(std::fabs(v[c] - deq[c]), st / 2 * (1 + 1e-5) + 1e-6 * std::fabs(v[c]));
        EXPECT_GE(v[c], f16_to_f32(mh));
      }
      EXPECT_EQ(row.size(), groups * 4 + (s.head_dim * bits + 7) / 8);
    }
  }
}

// The stored codes read back by this test's own bit reader: min + code*step, summed in
// double (exact here) and rounded once to float, as the library's reconstruction must be.
std::vector<float> reference_dequantize_key_block(const std::vector<uint8_t>& block, uint32_t tokens, uint32_t dim,
                                                  uint32_t bits) {
  std::vector<float> out(static_cast<size_t>(tokens) * dim);
  const size_t row_bytes = kv_packed_bytes(bits, dim);
  for (uint32_t c = 0; c < dim; ++c) {
    uint16_t mh, sh;
    std::memcpy(&mh, &block[2 * c], 2);
    std::memcpy(&sh, &block[2 * (dim + c)], 2);
    for (uint32_t t = 0; t < tokens; ++t) {
      const uint8_t* row = block.data() + 4 * dim + t * row_bytes;
      uint32_t code = 0;
      for (uint32_t b = 0; b < bits; ++b) code |= ((row[(c * bits + b) / 8] >> ((c * bits + b) % 8)) & 1u) << b;
      out[static_cast<size_t>(t) * dim + c] =
          static_cast<float>(static_cast<double>(f16_to_f32(mh)) + code * static_cast<double>(f16_to_f32(sh)));
    }
  }
  return out;
}

std::vector<float> reference_dequantize_value_row(const std::vector<uint8_t>& row, uint32_t dim, uint32_t group,
                                                  uint32_t bits) {
  std::vector<float> out(dim);
  const uint8_t* codes = row.data() + 4 * ((dim + group - 1) / group);
  for (uint32_t c = 0; c < dim; ++c) {
    uint16_t mh, sh;
    std::memcpy(&mh, &row[4 * (c / group)], 2);
    std::memcpy(&sh, &row[4 * (c / group) + 2], 2);
    uint32_t code = 0;
    for (uint32_t b = 0; b < bits; ++b) code |= ((codes[(c * bits + b) / 8] >> ((c * bits + b) % 8)) & 1u) << b;
    out[c] = static_cast<float>(static_cast<double>(f16_to_f32(mh)) + code * static_cast<double>(f16_to_f32(sh)));
  }
  return out;
}

struct Aging {
  uint32_t from, to;
};
const Aging kAgings[] = {{8, 4}, {8, 2}, {4, 2}, {4, 3}, {3, 2}, {2, 2}, {8, 8}};

// Re-quantizing a stored block equals quantizing its stored values with the scalar path.
TEST_P(KvQuantIsaTest, RequantizedKeyBlockEqualsScalarQuantizeOfStoredValues) {
  uint32_t seed = 400;
  for (const Shape& s : kShapes) {
    for (const Aging& a : kAgings) {
      const auto keys = kv_random_rows(s.block_tokens, s.head_dim, seed++);
      std::vector<uint8_t> stored(kv_key_block_bytes(a.from, s.head_dim, s.block_tokens));
      kv_quantize_key_block(Isa::Scalar, keys.data(), s.block_tokens, s.head_dim, a.from, stored.data());
      const auto values = reference_dequantize_key_block(stored, s.block_tokens, s.head_dim, a.from);
      const size_t bytes = kv_key_block_bytes(a.to, s.head_dim, s.block_tokens);
      std::vector<uint8_t> want(bytes), got(bytes, 0xAB);
      kv_quantize_key_block(Isa::Scalar, values.data(), s.block_tokens, s.head_dim, a.to, want.data());
      std::vector<float> scratch(static_cast<size_t>(s.block_tokens) * s.head_dim);
      kv_requantize_key_block(GetParam(), stored.data(), s.block_tokens, s.head_dim, a.from, a.to, scratch.data(),
                              got.data());
      ASSERT_EQ(want, got) << "dim " << s.head_dim << " block " << s.block_tokens << " " << a.from << ">" << a.to;
    }
  }
}

TEST_P(KvQuantIsaTest, RequantizedValueRowEqualsScalarQuantizeOfStoredValues) {
  uint32_t seed = 500;
  for (const Shape& s : kShapes) {
    for (const Aging& a : kAgings) {
      const auto rows = kv_random_rows(5, s.head_dim, seed++);
      for (uint32_t r = 0; r < 5; ++r) {
        std::vector<uint8_t> stored(kv_value_row_bytes(a.from, s.head_dim, s.group));
        kv_quantize_value_row(Isa::Scalar, rows.data() + r * s.head_dim, s.head_dim, s.group, a.from, stored.data());
        const auto values = reference_dequantize_value_row(stored, s.head_dim, s.group, a.from);
        const size_t bytes = kv_value_row_bytes(a.to, s.head_dim, s.group);
        std::vector<uint8_t> want(bytes), got(bytes, 0xCD);
        kv_quantize_value_row(Isa::Scalar, values.data(), s.head_dim, s.group, a.to, want.data());
        std::vector<float> scratch(s.head_dim);
        kv_requantize_value_row(GetParam(), stored.data(), s.head_dim, s.group, a.from, a.to, scratch.data(),
                                got.data());
        ASSERT_EQ(want, got) << "dim " << s.head_dim << " group " << s.group << " " << a.from << ">" << a.to;
      }
    }
  }
}

// Truncation written out from its definition: code c keeps c >> s; the pair becomes
// (f16(min + (2^s - 1)/2 * step), step * 2^s). Every original element then lies within
// 2^(s-1) steps of the aged reconstruction (plus half an f16 ulp of the new minimum).
struct TruncatedPair {
  uint16_t min, step;
};
TruncatedPair truncated_pair(const uint8_t* min_at, const uint8_t* step_at, uint32_t shift) {
  uint16_t mh, sh;
  std::memcpy(&mh, min_at, 2);
  std::memcpy(&sh, step_at, 2);
  const double mn = f16_to_f32(mh), st = f16_to_f32(sh);
  return {f32_to_f16(static_cast<float>(mn + ((1 << shift) - 1) / 2.0 * st)),
          f32_to_f16(static_cast<float>(st * (1 << shift)))};
}

uint32_t read_code(const uint8_t* row, uint32_t i, uint32_t bits) {
  uint32_t code = 0;
  for (uint32_t b = 0; b < bits; ++b) code |= ((row[(i * bits + b) / 8] >> ((i * bits + b) % 8)) & 1u) << b;
  return code;
}

TEST(KvTruncateTest, KeyBlocksMatchTheDefinitionAndStayWithinTheBin) {
  uint32_t seed = 600;
  for (const Shape& s : kShapes) {
    for (const Aging& a : kAgings) {
      if (a.to == a.from) continue;
      const uint32_t shift = a.from - a.to, D = s.head_dim, G = s.block_tokens;
      const auto keys = kv_random_rows(G, D, seed++);
      std::vector<uint8_t> stored(kv_key_block_bytes(a.from, D, G)), got(kv_key_block_bytes(a.to, D, G), 0xAB);
      kv_quantize_key_block(Isa::Scalar, keys.data(), G, D, a.from, stored.data());
      kv_truncate_key_block(stored.data(), G, D, a.from, a.to, got.data());
      std::vector<uint8_t> want(got.size(), 0);
      for (uint32_t c = 0; c < D; ++c) {
        const TruncatedPair p = truncated_pair(&stored[2 * c], &stored[2 * (D + c)], shift);
        std::memcpy(&want[2 * c], &p.min, 2);
        std::memcpy(&want[2 * (D + c)], &p.step, 2);
        uint16_t sh;
        std::memcpy(&sh, &stored[2 * (D + c)], 2);
        for (uint32_t t = 0; t < G; ++t) {
          const uint32_t code = read_code(stored.data() + 4 * D + t * kv_packed_bytes(a.from, D), c, a.from) >> shift;
          uint8_t* row = want.data() + 4 * D + t * kv_packed_bytes(a.to, D);
          for (uint32_t b = 0; b < a.to; ++b) row[(c * a.to + b) / 8] |= ((code >> b) & 1u) << ((c * a.to + b) % 8);
          const double rec = f16_to_f32(p.min) + code * static_cast<double>(f16_to_f32(p.step));
          const double bound = (1 << (shift - 1)) * static_cast<double>(f16_to_f32(sh)) * (1 + 1e-5) +
                               std::fabs(f16_to_f32(p.min)) / 2048 + 1e-6;
          ASSERT_LE(std::fabs(keys[t * D + c] - rec), bound) << "dim " << D << " " << a.from << ">" << a.to;
        }
      }
      ASSERT_EQ(want, got) << "dim " << D << " block " << G << " " << a.from << ">" << a.to;
    }
  }
}

TEST(KvTruncateTest, ValueRowsMatchTheDefinition) {
  uint32_t seed = 700;
  for (const Shape& s : kShapes) {
    for (const Aging& a : kAgings) {
      if (a.to == a.from) continue;
      const uint32_t shift = a.from - a.to, D = s.head_dim, groups = (D + s.group - 1) / s.group;
      const auto rows = kv_random_rows(3, D, seed++);
      for (uint32_t r = 0; r < 3; ++r) {
        std::vector<uint8_t> stored(kv_value_row_bytes(a.from, D, s.group)), got(kv_value_row_bytes(a.to, D, s.group));
        kv_quantize_value_row(Isa::Scalar, rows.data() + r * D, D, s.group, a.from, stored.data());
        kv_truncate_value_row(stored.data(), D, s.group, a.from, a.to, got.data());
        std::vector<uint8_t> want(got.size(), 0);
        for (uint32_t g = 0; g < groups; ++g) {
          const TruncatedPair p = truncated_pair(&stored[4 * g], &stored[4 * g + 2], shift);
          std::memcpy(&want[4 * g], &p.min, 2);
          std::memcpy(&want[4 * g + 2], &p.step, 2);
        }
        for (uint32_t c = 0; c < D; ++c) {
          const uint32_t code = read_code(stored.data() + 4 * groups, c, a.from) >> shift;
          for (uint32_t b = 0; b < a.to; ++b)
            want[4 * groups + (c * a.to + b) / 8] |= ((code >> b) & 1u) << ((c * a.to + b) % 8);
        }
        ASSERT_EQ(want, got) << "dim " << D << " group " << s.group << " " << a.from << ">" << a.to;
      }
    }
  }
}

// Integer-generated data (exact floats on every machine) aged 8>4, 4>2 and 3>2 both ways
// (re-quantized and truncated): the bytes' FNV-1a hash is pinned, so x86 and AArch64 (qemu)
// must produce the same bytes.
TEST_P(KvQuantIsaTest, RequantizedBytesArePinnedAcrossArchitectures) {
  const uint32_t dim = 64, tokens = 32, group = 32;
  std::vector<float> x(static_cast<size_t>(tokens) * dim);
  uint32_t state = 12345;
  for (size_t i = 0; i < x.size(); ++i) {
    state = state * 1664525u + 1013904223u;
    const float boost = (i % dim) % 17 == 3 ? 8.0f : 1.0f;
    x[i] = static_cast<float>(static_cast<int32_t>((state >> 8) % 2001) - 1000) / 256.0f * boost;
  }
  uint64_t hash = 0xcbf29ce484222325ull;
  auto mix = [&](const std::vector<uint8_t>& bytes) {
    for (uint8_t b : bytes) hash = (hash ^ b) * 0x100000001b3ull;
  };
  std::vector<float> scratch(x.size());
  for (const Aging a : {Aging{8, 4}, Aging{4, 2}, Aging{3, 2}}) {
    std::vector<uint8_t> stored(kv_key_block_bytes(a.from, dim, tokens)), aged(kv_key_block_bytes(a.to, dim, tokens));
    kv_quantize_key_block(GetParam(), x.data(), tokens, dim, a.from, stored.data());
    kv_requantize_key_block(GetParam(), stored.data(), tokens, dim, a.from, a.to, scratch.data(), aged.data());
    mix(aged);
    for (uint32_t t = 0; t < tokens; ++t) {
      std::vector<uint8_t> row(kv_value_row_bytes(a.from, dim, group)), aged_row(kv_value_row_bytes(a.to, dim, group));
      kv_quantize_value_row(GetParam(), x.data() + t * dim, dim, group, a.from, row.data());
      kv_requantize_value_row(GetParam(), row.data(), dim, group, a.from, a.to, scratch.data(), aged_row.data());
      mix(aged_row);
      kv_truncate_value_row(row.data(), dim, group, a.from, a.to, aged_row.data());
      mix(aged_row);
    }
    kv_truncate_key_block(stored.data(), tokens, dim, a.from, a.to, aged.data());
    mix(aged);
  }
  EXPECT_EQ(hash, 0xe7f5f7496215ea94ull) << std::hex << hash;
}

// Floats that exercise every branch of f32 -> f16: each half's own value, the midpoints of
// neighbouring halves (ties, to even) and one f32 ulp either side, overflow, underflow into
// half subnormals and to zero, f32 subnormals, infinities, NaNs with assorted payloads, and
// random bit patterns.
std::vector<float> half_conversion_inputs() {
  std::vector<float> x;
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float a = f16_to_f32(static_cast<uint16_t>(h));
    x.push_back(a);
    if ((h & 0x7c00u) == 0x7c00u || (h & 0x7fffu) == 0x7bffu) continue;       // no finite neighbour above
    const float mid = 0.5f * (a + f16_to_f32(static_cast<uint16_t>(h + 1)));  // exact: 12 significant bits
    x.push_back(mid);
    x.push_back(std::nextafter(mid, 0.0f));
    x.push_back(std::nextafter(mid, std::signbit(mid) ? -INFINITY : INFINITY));
  }
  for (float v : {65504.0f, 65519.99f, 65520.0f, 1e9f, -65520.0f, 5.96e-8f, 2.98e-8f, 2.99e-8f, 1e-30f, -1e-40f, 1e-45f,
                  INFINITY, -INFINITY, 0.0f, -0.0f})
    x.push_back(v);
  for (uint32_t b : {0x7f800001u, 0x7fbfffffu, 0x7fc00000u, 0x7fc00001u, 0x7fffffffu, 0xffc02000u, 0xff800400u})
    x.push_back(float_from_bits(b));
  std::mt19937 rng(5);
  for (int i = 0; i < 200000; ++i) x.push_back(float_from_bits(static_cast<uint32_t>(rng())));
  return x;
}

// The scalar definition against IEEE round-to-nearest-even, independently of any ISA: a tie
// between neighbouring halves goes to the one with the even mantissa, anything nearer to one
// goes to it, and a NaN stays a quiet NaN.
TEST(KvHalfTest, FloatToHalfRoundsToNearestEven) {
  for (uint32_t h = 0; h < 0x7bffu; ++h) {  // positive finite halves and their upper neighbour
    const float a = f16_to_f32(static_cast<uint16_t>(h)), b = f16_to_f32(static_cast<uint16_t>(h + 1));
    const float mid = 0.5f * (a + b);
    ASSERT_EQ(f32_to_f16(mid), (h & 1u) == 0 ? h : h + 1) << std::hex << h;
    ASSERT_EQ(f32_to_f16(std::nextafter(mid, 0.0f)), h) << std::hex << h;
    ASSERT_EQ(f32_to_f16(std::nextafter(mid, INFINITY)), h + 1) << std::hex << h;
    ASSERT_EQ(f32_to_f16(-mid), 0x8000u | ((h & 1u) == 0 ? h : h + 1)) << std::hex << h;
  }
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00u);  // the tie above the largest half overflows
  EXPECT_EQ(f32_to_f16(std::nextafter(65520.0f, 0.0f)), 0x7bffu);
  for (float nan : half_conversion_inputs()) {
    if (!std::isnan(nan)) continue;
    const uint16_t h = f32_to_f16(nan);
    ASSERT_EQ(h & 0x7e00u, 0x7e00u) << std::hex << h;  // exponent all ones, quiet bit set
  }
}

// The f16 caches' row conversion: every ISA equals the scalar definition bit for bit, at odd
// lengths and offsets (vector bodies and scalar tails).
TEST_P(KvQuantIsaTest, FloatHalvesEqualScalarBitForBit) {
  const std::vector<float> x = half_conversion_inputs();
  std::vector<uint16_t> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = f32_to_f16(x[i]);
  std::vector<uint16_t> got(x.size() + 64);
  for (uint32_t n : {1u, 3u, 7u, 8u, 15u, 16u, 17u, 31u, 33u, 100u, 129u}) {
    for (size_t offset = 0; offset + n <= 4000; offset += 997) {
      std::fill(got.begin(), got.end(), 0xabcdu);
      kv_float_halves(GetParam(), x.data() + offset, n, got.data());
      ASSERT_EQ(0, std::memcmp(got.data(), want.data() + offset, n * 2)) << "n " << n << " offset " << offset;
      ASSERT_EQ(got[n], 0xabcdu) << "wrote past n " << n;
    }
  }
  std::fill(got.begin(), got.end(), 0);
  kv_float_halves(GetParam(), x.data(), static_cast<uint32_t>(x.size()), got.data());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], want[i]) << "input bits " << std::hex << float_bits(x[i]);
}

INSTANTIATE_TEST_SUITE_P(Isa, KvQuantIsaTest, ::testing::ValuesIn(testing::all_kv_isas()), testing::kv_isa_name);

TEST(KvRotationTest, MatchesExplicitSylvesterMatrixAndInvertsItself) {
  for (uint32_t n : {2u, 8u, 64u, 128u}) {
    ASSERT_TRUE(kv_rotation_supported(n));
    const auto x = kv_random_rows(1, n, n);
    std::vector<float> y = x;
    kv_hadamard_rotate(y.data(), n);
    for (uint32_t i = 0; i < n; ++i) {
      double want = 0;
      for (uint32_t j = 0; j < n; ++j) want += (__builtin_popcount(i & j) % 2 ? -1.0 : 1.0) * x[j];
      want /= std::sqrt(static_cast<double>(n));
      ASSERT_NEAR(y[i], want, 1e-4 * (1 + std::fabs(want)));
    }
    kv_hadamard_rotate(y.data(), n);
    for (uint32_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], x[i], 1e-5 * (1 + std::fabs(x[i])));
  }
  EXPECT_FALSE(kv_rotation_supported(100));
  EXPECT_FALSE(kv_rotation_supported(96));
}

TEST(KvFormatTest, RejectsBadFormats) {
  EXPECT_EQ(kv_format_validate(4, 2, 128, 32, 32), Error::Ok);
  EXPECT_EQ(kv_format_validate(5, 2, 128, 32, 32), Error::InvalidArgument);
  EXPECT_EQ(kv_format_validate(4, 2, 128, 32, 12), Error::InvalidArgument);
  EXPECT_EQ(kv_format_validate(4, 2, 0, 32, 32), Error::InvalidArgument);
  EXPECT_EQ(kv_format_validate(4, 2, 128, 0, 32), Error::InvalidArgument);
}

}  // namespace
}  // namespace tern

#include "kernels/kv_ukernels.h"

namespace tern {
namespace {

// kernels/half.h against the definition of a half, for every one of them: the value from
// its fields with ldexp, NaN as NaN, and the way back to the same bits.
TEST(KvHalfTest, ConversionMatchesTheDefinitionForEveryHalf) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const uint32_t sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    const float got = f16_to_f32(static_cast<uint16_t>(h));
    if (exp == 31 && mant != 0) {
      ASSERT_TRUE(std::isnan(got)) << h;
      continue;
    }
    const double magnitude = exp == 31  ? INFINITY
                             : exp == 0 ? std::ldexp(static_cast<double>(mant), -24)
                                        : std::ldexp(1.0 + mant / 1024.0, static_cast<int>(exp) - 15);
    const float want = static_cast<float>(sign ? -magnitude : magnitude);
    ASSERT_EQ(std::memcmp(&want, &got, 4), 0) << std::hex << h;
    ASSERT_EQ(f32_to_f16(got), h) << std::hex << h;
  }
}

}  // namespace
}  // namespace tern
