// Aging tiers of the compressed KV cache (runtime/kv/kv_policy.h): the mode syntax, which
// positions sit in which tier and at which bytes, the byte function and the planner's
// capacity against counts made here from the formats.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dense_matmul.h"
#include "runtime/engine/memory_plan.h"
#include "runtime/kv/compressed_kv_cache.h"
#include "runtime/kv/kv_cache_spec.h"
#include "tests/support/kv_test_arena.h"
#include "tests/support/kv_test_util.h"

namespace tern {
namespace {

using testing::kv_random_rows;
using Arena = testing::KvTestArena;

TEST(KvAgingModeTest, ParsesTheSuffixOnEveryCompressedMode) {
  KvModeName m;
  ASSERT_EQ(parse_kv_mode("q4>2@96", &m), Error::Ok);
  EXPECT_EQ(m.kind, KvModeName::Kind::Uniform);
  EXPECT_EQ(m.bits.key_bits, 4);
  EXPECT_EQ(m.aged_bits, 2);
  EXPECT_EQ(m.aged_after_tokens, 96u);
  ASSERT_EQ(parse_kv_mode("k8v4>3@1", &m), Error::Ok);
  EXPECT_EQ(m.bits.key_bits, 8);
  EXPECT_EQ(m.bits.value_bits, 4);
  EXPECT_EQ(m.aged_bits, 3);
  EXPECT_EQ(m.aged_after_tokens, 1u);
  ASSERT_EQ(parse_kv_mode("adaptive:2.5>2@128", &m), Error::Ok);
  EXPECT_EQ(m.kind, KvModeName::Kind::Adaptive);
  EXPECT_FLOAT_EQ(m.average_bits, 2.5f);
  EXPECT_EQ(m.aged_bits, 2);
  ASSERT_EQ(parse_kv_mode("q3>2@50%", &m), Error::Ok);
  EXPECT_EQ(m.aged_bits, 2);
  EXPECT_EQ(m.aged_after_tokens, 0u);
  EXPECT_EQ(m.aged_after_percent, 50);
  ASSERT_EQ(parse_kv_mode("q4", &m), Error::Ok);
  EXPECT_EQ(m.aged_bits, 0);
  for (const char* bad :
       {"q4>", "q4>2", "q4>2@", "q4>2@0", "q4>5@64", "q4>2@-3", "q4>2@64x", "q4>>2@64", "fp16>2@64", "f32>4@32",
        ">2@64", "q4>2@99999999999", "q3>2@0%", "q3>2@101%", "q3>2@50%%", "q3>2@%", "q3>2@50%x"})
    EXPECT_EQ(parse_kv_mode(bad, &m), Error::InvalidArgument) << bad;

  KvModeRequest request;
  request.mode = "q4>2@40";
  ModelConfig config;
  config.layers = 2, config.kv_heads = 2, config.head_dim = 32, config.heads = 4;
  KvCacheSpec spec;
  ASSERT_EQ(make_kv_cache_spec(request, config, nullptr, nullptr, &spec), Error::Ok);
  EXPECT_TRUE(spec.compressed);
  EXPECT_EQ(spec.profile.aged_bits, 2);
  EXPECT_EQ(spec.profile.tier1_blocks(100), 2u);  // 40 tokens in blocks of 32
  EXPECT_STREQ(spec.name, "q4>2@40");
  // Different tiers are different layouts for saved states.
  KvCacheSpec plain;
  request.mode = "q4";
  ASSERT_EQ(make_kv_cache_spec(request, config, nullptr, nullptr, &plain), Error::Ok);
  EXPECT_NE(kv_layout_identity(spec, 484), kv_layout_identity(plain, 484));
  // A share of the middle: 13 blocks at 50 % keep 6 at full width; one block is always kept.
  request.mode = "q3>2@50%";
  ASSERT_EQ(make_kv_cache_spec(request, config, nullptr, nullptr, &spec), Error::Ok);
  EXPECT_EQ(spec.profile.tier1_blocks(13), 6u);
  EXPECT_EQ(spec.profile.tier1_blocks(1), 1u);
  EXPECT_EQ(spec.profile.tier1_blocks(0), 0u);
  EXPECT_EQ(spec.profile.tier1_blocks(200), 100u);
}

// S 4, W 8, G 4, T1 = 2 blocks; heads: 4-bit, 8/3-bit, exact, 2-bit (aged to min(width, 2)).
KvCacheProfile aging_profile(KvEviction eviction) {
  KvCacheProfile p = testing::small_kv_profile(eviction);
  p.rotate = false;
  p.aged_bits = 2;
  p.aged_after_tokens = 7;  // rounds up to 2 blocks
  return p;
}
const KvHeadBits kHeads[4] = {{4, 4}, {8, 3}, {0, 0}, {2, 2}};

// The reconstruction of code `code >> shift` of a (min, step) pair aged by truncation,
// written out from its definition: bins of 2^shift codes reconstructed at their centres.
float truncated_value(uint16_t min_h, uint16_t step_h, uint32_t code, uint32_t shift) {
  const double mn = f16_to_f32(min_h), st = f16_to_f32(step_h);
  const float centre = f16_to_f32(f32_to_f16(static_cast<float>(mn + ((1 << shift) - 1) / 2.0 * st)));
  const float step = static_cast<float>(st * (1 << shift));
  return centre + static_cast<float>(code >> shift) * step;
}

uint32_t code_at(const uint8_t* row, uint32_t i, uint32_t bits) {
  uint32_t code = 0;
  for (uint32_t b = 0; b < bits; ++b) code |= ((row[(i * bits + b) / 8] >> ((i * bits + b) % 8)) & 1u) << b;
  return code;
}

uint16_t u16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// What a position reads back, computed from the formats alone: exact, or quantized at the
// head's width, or that block aged: its codes truncated to 2 bits, or (requantize) its
// reconstruction quantized again.
std::vector<float> expected_rows(const std::vector<float>& x, uint32_t D, uint32_t G, uint32_t group, uint32_t first,
                                 KvHeadBits bits, bool keys, bool aged, bool requantize) {
  std::vector<float> out(static_cast<size_t>(G) * D);
  if (bits.exact()) {
    std::memcpy(out.data(), x.data() + static_cast<size_t>(first) * D, out.size() * sizeof(float));
    return out;
  }
  const uint32_t from = keys ? bits.key_bits : bits.value_bits;
  const uint32_t to = aged ? std::min<uint32_t>(from, 2) : from;
  if (keys) {
    std::vector<uint8_t> a(kv_key_block_bytes(from, D, G)), b(kv_key_block_bytes(to, D, G));
    kv_quantize_key_block(Isa::Scalar, x.data() + static_cast<size_t>(first) * D, G, D, from, a.data());
    kv_dequantize_key_block(a.data(), G, D, from, 0, G, out.data());
    if (to != from && !requantize) {
      for (uint32_t t = 0; t < G; ++t)
        for (uint32_t c = 0; c < D; ++c)
          out[static_cast<size_t>(t) * D + c] =
              truncated_value(u16_at(&a[2 * c]), u16_at(&a[2 * (D + c)]),
                              code_at(a.data() + 4 * D + t * kv_packed_bytes(from, D), c, from), from - to);
    } else if (to != from) {
      kv_quantize_key_block(Isa::Scalar, out.data(), G, D, to, b.data());
      kv_dequantize_key_block(b.data(), G, D, to, 0, G, out.data());
    }
    return out;
  }
  for (uint32_t t = 0; t < G; ++t) {
    std::vector<uint8_t> a(kv_value_row_bytes(from, D, group)), b(kv_value_row_bytes(to, D, group));
    float* row = out.data() + static_cast<size_t>(t) * D;
    kv_quantize_value_row(Isa::Scalar, x.data() + static_cast<size_t>(first + t) * D, D, group, from, a.data());
    kv_dequantize_value_row(a.data(), D, group, from, row);
    const uint32_t groups = (D + group - 1) / group;
    if (to != from && !requantize) {
      for (uint32_t c = 0; c < D; ++c)
        row[c] = truncated_value(u16_at(&a[4 * (c / group)]), u16_at(&a[4 * (c / group) + 2]),
                                 code_at(a.data() + 4 * groups, c, from), from - to);
    } else if (to != from) {
      kv_quantize_value_row(Isa::Scalar, row, D, group, to, b.data());
      kv_dequantize_value_row(b.data(), D, group, to, row);
    }
  }
  return out;
}

// Writes `written` positions to every head and checks each resident position reads back as
// the tier its age puts it in (window exact, then T1 blocks at the width, the rest aged),
// evicted positions as zeros, and attention over the cache against the rows it reads back.
void check_tiers(CompressedKvCache& cache, uint32_t written, bool requantize = false) {
  const KvCacheProfile& p = cache.profile();
  const uint32_t D = p.shape.head_dim, G = p.block_tokens, S = p.sink_tokens, ring = p.recent_window + G;
  const uint32_t capacity = cache.resident_capacity();
  const uint32_t blocks = (capacity - S - ring) / G, t1 = static_cast<uint32_t>(p.tier1_blocks(blocks));
  std::vector<std::vector<float>> keys, values;
  for (uint32_t h = 0; h < 4; ++h) {
    keys.push_back(kv_random_rows(written, D, 10 + h));
    values.push_back(kv_random_rows(written, D, 20 + h));
  }
  for (uint32_t pos = 0; pos < written; ++pos)
    for (uint32_t h = 0; h < 4; ++h)
      ASSERT_EQ(
          cache.write(0, h, pos, &keys[h][static_cast<size_t>(pos) * D], &values[h][static_cast<size_t>(pos) * D]),
          Error::Ok)
          << last_error_message();
  // Non-sink positions: the window holds the newest `window`, then whole blocks going back.
  const uint32_t n = written - std::min(written, S);
  const uint32_t window = n <= ring ? n : p.recent_window + (n - ring - 1) % G + 1;
  const uint32_t in_blocks = std::min((n - window) / G, blocks);
  const uint32_t kept_from = written - window - in_blocks * G;  // first non-sink resident position
  ASSERT_EQ(cache.evicted_positions(0, 0), n - window - in_blocks * G);
  std::vector<float> got(static_cast<size_t>(written) * D);
  for (uint32_t h = 0; h < 4; ++h) {
    for (bool k : {true, false}) {
      const std::vector<float>& x = k ? keys[h] : values[h];
      if (k) {
        cache.read_keys(0, h, 0, written, got.data());
      } else {
        cache.read_values(0, h, 0, written, got.data());
      }
      for (uint32_t pos = 0; pos < written; ++pos) {
        const float* row = got.data() + static_cast<size_t>(pos) * D;
        const bool exact = pos < S || pos >= written - window;
        if (exact || pos < kept_from) {
          for (uint32_t c = 0; c < D; ++c)
            ASSERT_EQ(row[c], pos < kept_from && pos >= S ? 0.0f : x[static_cast<size_t>(pos) * D + c])
                << "head " << h << " pos " << pos;
          continue;
        }
        const uint32_t block = (pos - kept_from) / G;  // 0 = oldest resident block
        const bool aged = in_blocks - block > t1;
        const uint32_t first = kept_from + block * G;
        const auto want = expected_rows(x, D, G, p.value_group, first, kHeads[h], k, aged, requantize);
        for (uint32_t c = 0; c < D; ++c)
          ASSERT_EQ(row[c], want[static_cast<size_t>(pos - first) * D + c])
              << "head " << h << (k ? " keys" : " values") << " pos " << pos << (aged ? " aged" : "");
      }
    }
    // Attention over what the cache holds equals softmax attention over its read-back rows.
    std::vector<float> kr(got.size()), vr(got.size());
    cache.read_keys(0, h, 0, written, kr.data());
    cache.read_values(0, h, 0, written, vr.data());
    const auto q = kv_random_rows(1, D, 99);
    std::vector<float> scores(static_cast<size_t>(kKvMaxQueries) * capacity), out(D);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    cache.attend(0, h, q.data(), 1, written, scale, scores.data(), out.data());
    std::vector<double> w;
    double top = -1e300, sum = 0;
    for (uint32_t pos = 0; pos < written; ++pos) {
      if (pos >= S && pos < kept_from) continue;
      double s = 0;
      for (uint32_t c = 0; c < D; ++c) s += static_cast<double>(q[c]) * kr[static_cast<size_t>(pos) * D + c];
      w.push_back(s * scale);
      top = std::max(top, w.back());
    }
    for (double& s : w) sum += (s = std::exp(s - top));
    for (uint32_t c = 0; c < D; ++c) {
      double want = 0;
      size_t i = 0;
      for (uint32_t pos = 0; pos < written; ++pos) {
        if (pos >= S && pos < kept_from) continue;
        want += w[i++] / sum * vr[static_cast<size_t>(pos) * D + c];
      }
      ASSERT_NEAR(out[c], want, 1e-4 * (1 + std::fabs(want))) << "head " << h << " channel " << c;
    }
  }
}

TEST(KvAgingCacheTest, OldBlocksAgeAndAreEvictedLast) {
  // 5 middle blocks: 2 at the width, 3 aged; 200 positions evict many times over. The same
  // with the boundary as a share of the middle: 50 % of 5 blocks is 2.
  KvCacheProfile p = aging_profile(KvEviction::Streaming);
  p.head_bits = kHeads;
  KvCacheProfile share = p;
  share.aged_after_tokens = 0;
  share.aged_after_percent = 50;
  ASSERT_EQ(share.tier1_blocks(5), 2u);
  for (uint32_t written : {3u, 20u, 28u, 36u, 41u, 200u, 203u, 1200u}) {
    if (written == 1200u) p = share;
    const uint32_t tokens = static_cast<uint32_t>(kv_tokens_for_blocks(p, 5));
    Arena a(kv_bytes_for_tokens(p, tokens));
    auto cache = CompressedKvCache::create(p, tokens, a.arena);
    ASSERT_TRUE(cache.ok()) << last_error_message();
    SCOPED_TRACE(written);
    check_tiers(**cache, written);
  }
}

// TERN_KV_AGING_REQUANTIZE=1: aged blocks are the reconstruction quantized again.
TEST(KvAgingCacheTest, RequantizingInsteadOfTruncatingOnRequest) {
  KvCacheProfile p = aging_profile(KvEviction::Streaming);
  p.head_bits = kHeads;
  const uint32_t tokens = static_cast<uint32_t>(kv_tokens_for_blocks(p, 5));
  Arena a(kv_bytes_for_tokens(p, tokens));
  setenv("TERN_KV_AGING_REQUANTIZE", "1", 1);
  auto cache = CompressedKvCache::create(p, tokens, a.arena);
  unsetenv("TERN_KV_AGING_REQUANTIZE");
  ASSERT_TRUE(cache.ok());
  check_tiers(**cache, 123, true);
}

TEST(KvAgingCacheTest, FullWithoutEvictionOnlyWhenBothTiersAre) {
  KvCacheProfile p = aging_profile(KvEviction::None);
  p.head_bits = kHeads;
  const uint32_t tokens = static_cast<uint32_t>(kv_tokens_for_blocks(p, 5));
  Arena a(kv_bytes_for_tokens(p, tokens));
  auto cache = CompressedKvCache::create(p, tokens, a.arena);
  ASSERT_TRUE(cache.ok());
  ASSERT_EQ((*cache)->resident_capacity(), tokens);
  check_tiers(**cache, tokens);
  const auto row = kv_random_rows(1, 32, 5);
  EXPECT_EQ((*cache)->write(0, 0, tokens, row.data(), row.data()), Error::ContextFull);
}

TEST(KvAgingCacheTest, SavedStateLoadsAndContinuesIdentically) {
  KvCacheProfile p = aging_profile(KvEviction::Streaming);
  p.head_bits = kHeads;
  const uint32_t tokens = static_cast<uint32_t>(kv_tokens_for_blocks(p, 5)), D = 32, written = 77, more = 30;
  Arena a(kv_bytes_for_tokens(p, tokens)), b(kv_bytes_for_tokens(p, tokens));
  auto one = CompressedKvCache::create(p, tokens, a.arena);
  auto two = CompressedKvCache::create(p, tokens, b.arena);
  ASSERT_TRUE(one.ok() && two.ok());
  const auto x = kv_random_rows(written + more, D, 7);
  auto write = [&](CompressedKvCache& c, uint32_t from, uint32_t to) {
    for (uint32_t pos = from; pos < to; ++pos)
      for (uint32_t h = 0; h < 4; ++h)
        ASSERT_EQ(c.write(0, h, pos, &x[static_cast<size_t>(pos) * D], &x[static_cast<size_t>(pos) * D]), Error::Ok);
  };
  write(**one, 0, written);
  std::vector<uint8_t> state((*one)->state_bytes(written));
  (*one)->save_state(written, state.data());
  ASSERT_EQ((*two)->load_state(written, state.data(), state.size()), Error::Ok) << last_error_message();
  write(**one, written, written + more);
  write(**two, written, written + more);
  std::vector<float> r1(static_cast<size_t>(written + more) * D), r2(r1.size());
  for (uint32_t h = 0; h < 4; ++h) {
    (*one)->read_keys(0, h, 0, written + more, r1.data());
    (*two)->read_keys(0, h, 0, written + more, r2.data());
    ASSERT_EQ(r1, r2) << h;
    (*one)->read_values(0, h, 0, written + more, r1.data());
    (*two)->read_values(0, h, 0, written + more, r2.data());
    ASSERT_EQ(r1, r2) << h;
  }
  // A truncated state is refused.
  EXPECT_EQ((*two)->load_state(written, state.data(), state.size() - 1), Error::CorruptFile);
}

// Bytes of a cache with M middle blocks, counted here from the formats: per head the sink and
// window rows, T1 blocks at the head's widths, the rest at the aged widths, the SIMD read
// padding, rounded to 64; plus a fixed part (object, tables, flush buffer) taken from the
// cache with no middle block.
struct IndependentCount {
  const KvCacheProfile& p;
  size_t fixed = 0;
  static size_t block_bytes(const KvCacheProfile& p, KvHeadBits b) {
    const size_t D = p.shape.head_dim, G = p.block_tokens;
    if (b.exact()) return 2 * G * D * (p.exact_type == KvType::F16 ? 2 : 4);
    const size_t key = D * 4 + G * ((D * b.key_bits + 7) / 8);
    const size_t value = G * (((D + p.value_group - 1) / p.value_group) * 4 + (D * b.value_bits + 7) / 8);
    return key + value;
  }
  size_t heads(uint64_t m) const {
    const size_t row = static_cast<size_t>(p.shape.head_dim) * (p.exact_type == KvType::F16 ? 2 : 4);
    uint64_t t1 = p.aging() ? std::min<uint64_t>(m, (p.aged_after_tokens + p.block_tokens - 1) / p.block_tokens) : m;
    if (p.aging() && p.aged_after_percent)
      t1 = std::min<uint64_t>(m, std::max<uint64_t>(1, m * p.aged_after_percent / 100));
    size_t total = 0;
    for (uint32_t l = 0; l < p.shape.layers; ++l)
      for (uint32_t h = 0; h < p.shape.kv_heads; ++h) {
        const KvHeadBits b = p.bits_of(l, h);
        const KvHeadBits aged = b.exact() || !p.aging() ? b
                                                        : KvHeadBits{std::min(b.key_bits, p.aged_bits),
                                                                     std::min(b.value_bits, p.aged_bits)};
        const size_t bytes = 2 * (p.sink_tokens + p.recent_window + p.block_tokens) * row + t1 * block_bytes(p, b) +
                             (m - t1) * block_bytes(p, aged) + kKvReadPadding;
        total += (bytes + 63) / 64 * 64;
      }
    return total;
  }
  explicit IndependentCount(const KvCacheProfile& profile) : p(profile) {
    fixed = kv_bytes_for_tokens(p, kv_tokens_for_blocks(p, 0)) - heads(0);
  }
  size_t bytes(uint64_t m) const { return fixed + heads(m); }
};

// Over random shapes, mixes, tiers and budgets: the byte function equals the independent
// count, a cache creates in exactly that many bytes from a misaligned arena, and the
// planner's capacity for a budget is the largest whose plan fits (one more block does not).
TEST(KvAgingBudgetTest, CapacityIsTheMostThatFitsAndNeverExceedsTheBudget) {
  std::mt19937 rng(77);
  const uint8_t widths[] = {0, 2, 3, 4, 8};
  const int iterations = std::getenv("TERN_SLOW_EMULATION") ? 25 : 100;
  for (int it = 0; it < iterations; ++it) {
    KvCacheSpec spec;
    spec.compressed = true;
    KvCacheProfile& p = spec.profile;
    testing::randomize_kv_layout(rng, 4, 3, 2, &p);
    p.aged_bits = widths[1 + rng() % 4];
    if (rng() % 2) {
      p.aged_after_tokens = 1 + rng() % 200;
    } else {
      p.aged_after_percent = static_cast<uint8_t>(1 + rng() % 100);
    }
    std::vector<KvHeadBits> bits(p.shape.layers * p.shape.kv_heads);
    for (auto& b : bits) {
      const uint8_t w = widths[rng() % 5];
      b = w == 0 ? KvHeadBits{0, 0} : KvHeadBits{w, widths[1 + rng() % 4]};
    }
    p.head_bits = bits.data();
    const IndependentCount count(p);
    SCOPED_TRACE(it);
    for (uint64_t m = 0; m < 30; ++m)
      ASSERT_EQ(kv_bytes_for_tokens(p, kv_tokens_for_blocks(p, m)), count.bytes(m)) << m;
    const uint64_t m = rng() % 30;
    const uint64_t tokens = kv_tokens_for_blocks(p, m);
    Arena a(count.bytes(m), rng() % 64);
    auto cache = CompressedKvCache::create(p, tokens, a.arena);
    ASSERT_TRUE(cache.ok()) << last_error_message();
    ASSERT_LE(a.arena.used_bytes(), count.bytes(m));
    ASSERT_EQ((*cache)->resident_capacity(), tokens);

    // The planner with a budget somewhere between two capacities.
    MemoryPlanRequest r;
    r.config.hidden = 64, r.config.ffn_hidden = 128, r.config.layers = p.shape.layers;
    r.config.heads = p.shape.kv_heads * 2, r.config.kv_heads = p.shape.kv_heads, r.config.head_dim = p.shape.head_dim;
    r.config.vocab = 100, r.config.max_context = 100000;
    r.kv = &spec;
    MemoryPlanRequest unlimited = r;
    unlimited.context_request = static_cast<uint32_t>(kv_tokens_for_blocks(p, 40));
    auto big = plan_memory(unlimited);
    ASSERT_TRUE(big.ok()) << last_error_message();
    r.budget_bytes = big->minimum_budget_bytes + rng() % (big->total_bytes - big->minimum_budget_bytes + 1);
    auto plan = plan_memory(r);
    ASSERT_TRUE(plan.ok()) << last_error_message();
    ASSERT_LE(plan->total_bytes, r.budget_bytes);
    const uint64_t planned_blocks = kv_blocks_for_tokens(p, plan->context_tokens);
    ASSERT_EQ(kv_tokens_for_blocks(p, planned_blocks), plan->context_tokens);
    ASSERT_EQ(plan->kv_bytes, count.bytes(planned_blocks));
    // One more position means one more block: that plan is over the budget.
    MemoryPlanRequest next = r;
    next.budget_bytes = 0;
    next.context_request = plan->context_tokens + 1;
    auto over = plan_memory(next);
    ASSERT_TRUE(over.ok());
    ASSERT_EQ(over->context_tokens, plan->context_tokens + p.block_tokens);
    ASSERT_EQ(over->kv_bytes, count.bytes(planned_blocks + 1));
    ASSERT_GT(over->total_bytes, r.budget_bytes);
  }
}

}  // namespace
}  // namespace tern
