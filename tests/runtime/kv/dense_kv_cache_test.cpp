// The dense f32 / f16 caches: rows round-trip, the byte function, the capacity.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/base/arena.h"
#include "runtime/kv/kv_cache.h"

namespace tern {
namespace {

class KvCacheTypes : public ::testing::TestWithParam<KvType> {};

void rows_round_trip(KvType type, uint32_t tokens) {
  SCOPED_TRACE(tokens);
  const KvShape shape{3, 2, 8};
  std::vector<uint8_t> memory(dense_kv_arena_bytes(type, shape, tokens));
  ArenaAllocator arena(memory.data(), memory.size());
  auto kv = create_dense_kv_cache(type, shape, tokens, arena);
  ASSERT_TRUE(kv.ok()) << last_error_message();
  EXPECT_EQ((*kv)->capacity_tokens(), tokens);
  auto value = [](uint32_t l, uint32_t h, uint32_t p, uint32_t i, bool is_key) {
    return (is_key ? 1.0f : -1.0f) * (1.0f + l * 0.25f + h * 0.125f + p * 0.0625f + i / 64.0f);
  };
  for (uint32_t l = 0; l < 3; ++l)
    for (uint32_t h = 0; h < 2; ++h)
      for (uint32_t p = 0; p < tokens; ++p) {
        float k[8], v[8];
        for (uint32_t i = 0; i < 8; ++i) k[i] = value(l, h, p, i, true), v[i] = value(l, h, p, i, false);
        ASSERT_EQ((*kv)->write(l, h, p, k, v), Error::Ok);
      }
  const float tolerance = type == KvType::F32 ? 0.0f : 2e-3f;  // 11-bit mantissa
  for (uint32_t l = 0; l < 3; ++l)
    for (uint32_t h = 0; h < 2; ++h) {
      std::vector<float> k(tokens * 8), v(tokens * 8);
      (*kv)->read_keys(l, h, 0, tokens, k.data());
      (*kv)->read_values(l, h, 1, tokens - 1, v.data());
      for (uint32_t p = 0; p < tokens; ++p)
        for (uint32_t i = 0; i < 8; ++i) {
          EXPECT_NEAR(k[p * 8 + i], value(l, h, p, i, true), tolerance);
          if (p > 0) {
            EXPECT_NEAR(v[(p - 1) * 8 + i], value(l, h, p, i, false), tolerance);
          }
        }
    }
}

// 5 positions: rows only; 21: two element-major key blocks of 8 and 5 rows (kv_key_index).
TEST_P(KvCacheTypes, RowsRoundTripWithoutOverlap) {
  for (uint32_t tokens : {5u, 21u}) rows_round_trip(GetParam(), tokens);
}

// The byte function grows by exactly the per-token bytes, and writing past the capacity
// is refused rather than overrunning the storage.
TEST_P(KvCacheTypes, BytesPerTokenAndCapacity) {
  const KvShape shape{30, 5, 128};
  const size_t per_token = 30u * 5 * 128 * 2 * (GetParam() == KvType::F32 ? 4 : 2);
  EXPECT_EQ(dense_kv_bytes_per_token(GetParam(), shape), per_token);
  EXPECT_EQ(dense_kv_arena_bytes(GetParam(), shape, 101) - dense_kv_arena_bytes(GetParam(), shape, 100), per_token);
  const KvShape small{1, 1, 8};
  std::vector<uint8_t> memory(dense_kv_arena_bytes(GetParam(), small, 4));
  ArenaAllocator arena(memory.data(), memory.size());
  auto kv = create_dense_kv_cache(GetParam(), small, 4, arena);
  ASSERT_TRUE(kv.ok()) << last_error_message();
  const float row[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  for (uint32_t p = 0; p < 4; ++p) EXPECT_EQ((*kv)->write(0, 0, p, row, row), Error::Ok);
  EXPECT_EQ((*kv)->write(0, 0, 4, row, row), Error::ContextFull);
  EXPECT_FALSE((*kv)->evicting());
}

INSTANTIATE_TEST_SUITE_P(Types, KvCacheTypes, ::testing::Values(KvType::F16, KvType::F32),
                         [](const ::testing::TestParamInfo<KvType>& info) { return to_string(info.param); });

}  // namespace
}  // namespace tern
