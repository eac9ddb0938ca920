#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/kv/compressed_kv_cache.h"
#include "runtime/kv/kv_cache_spec.h"
#include "runtime/kv/kv_profile.h"
#include "tests/support/kv_test_arena.h"
#include "tests/support/kv_test_util.h"

namespace tern {
namespace {

using testing::kv_random_rows;
using Arena = testing::KvTestArena;

KvCacheProfile small_profile(KvType exact, KvHeadBits bits) {
  KvCacheProfile p;
  p.shape = KvShape{3, 2, 32};
  p.exact_type = exact;
  p.sink_tokens = 4;
  p.recent_window = 8;
  p.block_tokens = 4;
  p.value_group = 16;
  p.uniform = bits;
  p.eviction = KvEviction::None;
  return p;
}

void expect_exact_heads_equal_dense(KvType type) {
  const KvCacheProfile p = small_profile(type, KvHeadBits{0, 0});
  const uint32_t tokens = 60, D = p.shape.head_dim;
  Arena a(kv_bytes_for_tokens(p, tokens)), b(dense_kv_arena_bytes(type, p.shape, tokens));
  auto compressed = CompressedKvCache::create(p, tokens, a.arena);
  ASSERT_TRUE(compressed.ok()) << last_error_message();
  auto dense = create_dense_kv_cache(type, p.shape, tokens, b.arena);
  ASSERT_TRUE(dense.ok());
  ASSERT_GE((*compressed)->capacity_tokens(), tokens);
  const auto keys = kv_random_rows(tokens * 6, D, 1), values = kv_random_rows(tokens * 6, D, 2);
  for (uint32_t pos = 0; pos < tokens; ++pos)
    for (uint32_t l = 0; l < 3; ++l)
      for (uint32_t h = 0; h < 2; ++h) {
        const size_t r = (static_cast<size_t>(pos) * 6 + l * 2 + h) * D;
        ASSERT_EQ((*compressed)->write(l, h, pos, &keys[r], &values[r]), Error::Ok);
        ASSERT_EQ((*dense)->write(l, h, pos, &keys[r], &values[r]), Error::Ok);
      }
  std::vector<float> want(tokens * D), got(tokens * D);
  for (uint32_t l = 0; l < 3; ++l)
    for (uint32_t h = 0; h < 2; ++h) {
      (*dense)->read_keys(l, h, 0, tokens, want.data());
      (*compressed)->read_keys(l, h, 0, tokens, got.data());
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float))) << "keys " << l << "." << h;
      (*dense)->read_values(l, h, 0, tokens, want.data());
      (*compressed)->read_values(l, h, 0, tokens, got.data());
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float))) << "values " << l << "." << h;
      // A window read in the middle of the history too.
      (*dense)->read_keys(l, h, 13, 9, want.data());
      (*compressed)->read_keys(l, h, 13, 9, got.data());
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), 9 * D * sizeof(float)));
    }
}

TEST(CompressedKvCacheTest, ExactHeadsEqualDenseF32Cache) { expect_exact_heads_equal_dense(KvType::F32); }
TEST(CompressedKvCacheTest, ExactHeadsEqualDenseF16Cache) { expect_exact_heads_equal_dense(KvType::F16); }

// attend() over whatever the cache keeps equals dequantize-then-attend over the rows it
// reads back, for quantized, rotated, exact and mixed heads, before and after eviction.
TEST(CompressedKvCacheTest, AttendMatchesReadBackReference) {
  for (int variant = 0; variant < 3; ++variant) {
    KvCacheProfile p = small_profile(KvType::F16, KvHeadBits{4, 2});
    p.shape = KvShape{2, 3, 64};
    p.eviction = KvEviction::Streaming;
    const KvHeadBits mixed[6] = {{0, 0}, {2, 2}, {3, 4}, {8, 8}, {4, 3}, {2, 8}};
    if (variant == 1) p.head_bits = mixed;
    if (variant == 2) p.rotate = false;
    const uint32_t D = 64, capacity = 40, written = 100;
    Arena a(kv_bytes_for_tokens(p, capacity));
    auto cache = CompressedKvCache::create(p, capacity, a.arena);
    ASSERT_TRUE(cache.ok());
    const auto keys = kv_random_rows(written * 6, D, 5), values = kv_random_rows(written * 6, D, 6);
    const auto queries = kv_random_rows(2, D, 7, 1.0f);
    std::vector<float> scores(2 * (*cache)->resident_capacity()), out(2 * D), k(D), v(D);
    std::vector<uint32_t> positions((*cache)->resident_capacity());
    for (uint32_t pos = 0; pos < written; ++pos) {
      for (uint32_t l = 0; l < 2; ++l)
        for (uint32_t h = 0; h < 3; ++h) {
          const size_t r = (static_cast<size_t>(pos) * 6 + l * 3 + h) * D;
          ASSERT_EQ((*cache)->write(l, h, pos, &keys[r], &values[r]), Error::Ok);
        }
      if (pos % 9 != 4) continue;
      for (uint32_t l = 0; l < 2; ++l)
        for (uint32_t h = 0; h < 3; ++h) {
          const uint32_t end = pos + 1 - (pos % 3);  // also a causal limit inside the window
          (*cache)->attend(l, h, queries.data(), 2, end, 0.125f, scores.data(), out.data());
          const uint32_t n = (*cache)->resident_positions(l, h, positions.data());
          for (uint32_t qi = 0; qi < 2; ++qi) {
            std::vector<double> s, o(D, 0.0);
            std::vector<std::vector<float>> vs;
            double mx = -1e300, sum = 0, max_v = 0;
            for (uint32_t i = 0; i < n && positions[i] < end; ++i) {
              (*cache)->read_keys(l, h, positions[i], 1, k.data());
              (*cache)->read_values(l, h, positions[i], 1, v.data());
              double dot = 0;
              for (uint32_t c = 0; c < D; ++c) dot += static_cast<double>(queries[qi * D + c]) * k[c];
              s.push_back(dot * 0.125);
              vs.push_back(v);
              mx = std::max(mx, s.back());
            }
            for (auto& x : s) sum += (x = std::exp(x - mx));
            for (size_t i = 0; i < s.size(); ++i)
              for (uint32_t c = 0; c < D; ++c) {
                o[c] += s[i] / sum * vs[i][c];
                max_v = std::max(max_v, static_cast<double>(std::fabs(vs[i][c])));
              }
            for (uint32_t c = 0; c < D; ++c)
              ASSERT_NEAR(out[qi * D + c], o[c], 5e-5 * max_v + 1e-6)
                  << "variant " << variant << " pos " << pos << " head " << l << "." << h;
          }
        }
    }
    EXPECT_GT((*cache)->evicted_blocks(), 0u);
  }
}

TEST(CompressedKvCacheTest, QuantizedRowsStayCloseToTheOriginal) {
  for (uint8_t bits : {8, 4, 2}) {
    KvCacheProfile p = small_profile(KvType::F32, KvHeadBits{bits, bits});
    p.shape = KvShape{1, 1, 128};
    const uint32_t D = 128, tokens = 64;
    Arena a(kv_bytes_for_tokens(p, tokens));
    auto cache = CompressedKvCache::create(p, tokens, a.arena);
    ASSERT_TRUE(cache.ok());
    const auto keys = kv_random_rows(tokens, D, 9), values = kv_random_rows(tokens, D, 10);
    for (uint32_t pos = 0; pos < tokens; ++pos)
      ASSERT_EQ((*cache)->write(0, 0, pos, &keys[pos * D], &values[pos * D]), Error::Ok);
    std::vector<float> k(tokens * D), v(tokens * D);
    (*cache)->read_keys(0, 0, 0, tokens, k.data());
    (*cache)->read_values(0, 0, 0, tokens, v.data());
    double err = 0, norm = 0;
    for (size_t i = 0; i < k.size(); ++i) {
      err += (k[i] - keys[i]) * (k[i] - keys[i]) + (v[i] - values[i]) * (v[i] - values[i]);
      norm += keys[i] * keys[i] + values[i] * values[i];
    }
    // Uniform quantization of a range R with L levels has RMS error R/(L*sqrt(12)); the
    // rotated data span roughly ±3σ, so the relative RMS error is about 6/(L*3.5).
    const double levels = (1 << bits) - 1;
    EXPECT_LT(std::sqrt(err / norm), 2.0 / levels) << int(bits) << " bits";
    EXPECT_GT(std::sqrt(err / norm), bits == 8 ? 0.0 : 0.05 / levels) << "quantization seems not to happen";
    // Sinks and the window stay exact (f32 here, up to the rotation round trip).
    for (uint32_t pos : {0u, 3u, 63u}) {
      for (uint32_t c = 0; c < D; ++c) ASSERT_NEAR(k[pos * D + c], keys[pos * D + c], 1e-5);
    }
  }
}

TEST(CompressedKvCacheTest, StreamingEvictionKeepsSinksAndWindow) {
  KvCacheProfile p = small_profile(KvType::F16, KvHeadBits{4, 4});
  p.shape = KvShape{1, 1, 64};
  p.eviction = KvEviction::Streaming;
  const uint32_t D = 64, written = 200;
  Arena a(kv_bytes_for_tokens(p, 24));
  auto cache = CompressedKvCache::create(p, 24, a.arena);
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ((*cache)->resident_capacity(), 4u + 2 * 4 + 8 + 4);  // S + M*G + W + G with M = 2
  const auto keys = kv_random_rows(written, D, 11), values = kv_random_rows(written, D, 12);
  std::vector<uint32_t> pos((*cache)->resident_capacity());
  for (uint32_t t = 0; t < written; ++t) {
    ASSERT_EQ((*cache)->write(0, 0, t, &keys[t * D], &values[t * D]), Error::Ok);
    const uint32_t n = (*cache)->resident_positions(0, 0, pos.data());
    ASSERT_LE(n, (*cache)->resident_capacity());
    const uint32_t sinks = std::min(t + 1, 4u);
    for (uint32_t i = 0; i < sinks; ++i) ASSERT_EQ(pos[i], i);  // position 0 is never dropped
    // After the sinks, one contiguous run ending at t holding at least the last W tokens.
    ASSERT_EQ(pos[n - 1], t);
    for (uint32_t i = sinks + 1; i < n; ++i) ASSERT_EQ(pos[i], pos[i - 1] + 1);
    if (t + 1 >= 4 + 8) {
      ASSERT_GE(n - sinks, 8u);
    }
  }
  EXPECT_GT((*cache)->evicted_blocks(), 0u);
  std::vector<float> k0(D);
  (*cache)->read_keys(0, 0, 0, 1, k0.data());
  for (uint32_t c = 0; c < D; ++c) ASSERT_NEAR(k0[c], keys[c], 2e-3 * (1 + std::fabs(keys[c])));
  (*cache)->read_keys(0, 0, 50, 1, k0.data());  // evicted: zeros
  for (uint32_t c = 0; c < D; ++c) ASSERT_EQ(k0[c], 0.0f);
}

TEST(CompressedKvCacheTest, WithoutEvictionAFullCacheRefusesWrites) {
  KvCacheProfile p = small_profile(KvType::F16, KvHeadBits{2, 2});
  p.shape = KvShape{1, 1, 32};
  Arena a(kv_bytes_for_tokens(p, 20));
  auto cache = CompressedKvCache::create(p, 20, a.arena);
  ASSERT_TRUE(cache.ok());
  const uint32_t cap = (*cache)->resident_capacity();
  const auto rows = kv_random_rows(cap + 1, 32, 13);
  for (uint32_t t = 0; t < cap; ++t) ASSERT_EQ((*cache)->write(0, 0, t, &rows[t * 32], &rows[t * 32]), Error::Ok);
  EXPECT_EQ((*cache)->write(0, 0, cap, &rows[cap * 32], &rows[cap * 32]), Error::ContextFull);
  EXPECT_EQ((*cache)->next_position(0, 0), cap);
}

TEST(KvPolicyTest, HandComputedBytesPerToken) {
  KvCacheProfile p;
  p.shape = KvShape{1, 1, 32};
  p.block_tokens = 32;
  p.value_group = 32;
  p.uniform = KvHeadBits{4, 4};
  // Keys: 32 channels x (2+2) bytes + 32 tokens x 16 bytes = 640; values: 32 x (4 + 16) = 640.
  EXPECT_EQ(kv_head_block_bytes(p, p.uniform), 1280u);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(p), 40.0);
  EXPECT_DOUBLE_EQ(kv_average_bits(p), 5.0);
  // bitnet-b1.58-2B-4T in f16: 30 layers x 5 heads x 128 dims x 2 bytes x (K + V) = 76,800.
  p.shape = KvShape{30, 5, 128};
  p.uniform = KvHeadBits{0, 0};
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(p), 76800.0);
}

// The budget is never exceeded: over many shapes, mixes and sizes, a cache of any capacity
// creates in kv_bytes_for_tokens bytes, whatever the arena's alignment, and one block more
// costs more (so the planner's bisection over capacities finds the largest that fits).
TEST(KvPolicyTest, CapacityNeverExceedsTheBudget) {
  std::mt19937 rng(2024);
  const uint8_t widths[] = {0, 2, 3, 4, 8};
  const int iterations = std::getenv("TERN_SLOW_EMULATION") ? 40 : 200;
  int fitted = 0;
  for (int it = 0; it < iterations; ++it) {
    KvCacheProfile p;
    testing::randomize_kv_layout(rng, 5, 4, 3, &p);
    std::vector<KvHeadBits> bits(p.shape.layers * p.shape.kv_heads);
    for (auto& b : bits) {
      const uint8_t w = widths[rng() % 5];
      b = w == 0 ? KvHeadBits{0, 0} : KvHeadBits{w, widths[1 + rng() % 4]};
    }
    p.head_bits = bits.data();
    const uint64_t tokens = kv_tokens_for_blocks(p, rng() % 40);
    const size_t budget = kv_bytes_for_tokens(p, tokens);
    ASSERT_GT(kv_bytes_for_tokens(p, tokens + 1), budget);
    Arena a(budget, rng() % 64);
    auto cache = CompressedKvCache::create(p, tokens, a.arena);
    ASSERT_TRUE(cache.ok()) << last_error_message();
    ASSERT_LE(a.arena.used_bytes(), budget);
    ASSERT_EQ((*cache)->resident_capacity(), tokens);
    ++fitted;
  }
  EXPECT_EQ(fitted, iterations);
}

}  // namespace
}  // namespace tern

#include "schema/bundle_generated.h"

namespace tern {
namespace {

TEST(KvModeTest, NamesParseTheSameEverywhere) {
  KvModeName m;
  ASSERT_EQ(parse_kv_mode("fp16", &m), Error::Ok);
  EXPECT_EQ(m.kind, KvModeName::Kind::Exact);
  EXPECT_EQ(m.exact_type, KvType::F16);
  ASSERT_EQ(parse_kv_mode("q2", &m), Error::Ok);
  EXPECT_EQ(m.kind, KvModeName::Kind::Uniform);
  EXPECT_EQ(m.bits.key_bits, 2);
  EXPECT_EQ(m.bits.value_bits, 2);
  ASSERT_EQ(parse_kv_mode("k4v2", &m), Error::Ok);
  EXPECT_EQ(m.bits.key_bits, 4);
  EXPECT_EQ(m.bits.value_bits, 2);
  ASSERT_EQ(parse_kv_mode("adaptive:2.5", &m), Error::Ok);
  EXPECT_EQ(m.kind, KvModeName::Kind::Adaptive);
  EXPECT_FLOAT_EQ(m.average_bits, 2.5f);
  for (const char* bad : {"q5", "q", "q4x", "k4", "k4v5", "adaptive:", "adaptive:1", "int4", ""})
    EXPECT_EQ(parse_kv_mode(bad, &m), Error::InvalidArgument) << bad;
}

std::vector<uint8_t> build_profile(const std::vector<std::array<int, 5>>& heads) {
  flatbuffers::FlatBufferBuilder fb;
  std::vector<flatbuffers::Offset<schema::KvHeadProfile>> list;
  for (const auto& h : heads)  // layer, kv_head, key_bits, value_bits, sink
    list.push_back(schema::CreateKvHeadProfile(fb, h[0], h[1], 1.0f, 1.0f, schema::KvClass::Moderate,
                                               static_cast<uint8_t>(h[2]), static_cast<uint8_t>(h[3]), h[4] != 0));
  fb.Finish(schema::CreateKvProfile(fb, fb.CreateVector(list), 4, 64, 16, 3.0f));
  return std::vector<uint8_t>(fb.GetBufferPointer(), fb.GetBufferPointer() + fb.GetSize());
}

TEST(KvModeTest, ProfileFromBundle) {
  const KvShape shape{2, 2, 64};
  const auto buf = build_profile({{1, 1, 2, 3, 0}, {0, 0, 8, 8, 1}, {0, 1, 4, 2, 0}, {1, 0, 3, 3, 0}});
  const auto* profile = flatbuffers::GetRoot<schema::KvProfile>(buf.data());
  KvHeadBits bits[4];
  KvCacheProfile p;
  ASSERT_EQ(kv_profile_from_bundle(*profile, shape, bits, &p), Error::Ok) << last_error_message();
  EXPECT_TRUE(p.bits_of(0, 0).exact());  // sink head: unquantized
  EXPECT_EQ(p.bits_of(0, 1).key_bits, 4);
  EXPECT_EQ(p.bits_of(0, 1).value_bits, 2);
  EXPECT_EQ(p.bits_of(1, 0).key_bits, 3);
  EXPECT_EQ(p.bits_of(1, 1).value_bits, 3);
  EXPECT_EQ(p.sink_tokens, 4u);
  EXPECT_EQ(p.recent_window, 64u);
  EXPECT_EQ(p.block_tokens, 16u);

  const auto dup = build_profile({{0, 0, 2, 2, 0}, {0, 0, 2, 2, 0}, {1, 0, 2, 2, 0}, {1, 1, 2, 2, 0}});
  EXPECT_EQ(kv_profile_from_bundle(*flatbuffers::GetRoot<schema::KvProfile>(dup.data()), shape, bits, &p),
            Error::InvalidBundle);
  const auto bad = build_profile({{0, 0, 5, 2, 0}, {0, 1, 2, 2, 0}, {1, 0, 2, 2, 0}, {1, 1, 2, 2, 0}});
  EXPECT_EQ(kv_profile_from_bundle(*flatbuffers::GetRoot<schema::KvProfile>(bad.data()), shape, bits, &p),
            Error::InvalidBundle);
  const auto short_list = build_profile({{0, 0, 2, 2, 0}});
  EXPECT_EQ(kv_profile_from_bundle(*flatbuffers::GetRoot<schema::KvProfile>(short_list.data()), shape, bits, &p),
            Error::InvalidBundle);
}

}  // namespace
}  // namespace tern
