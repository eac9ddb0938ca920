// Heavy-hitter eviction with per-head token budgets (runtime/kv/kv_policy.h): the mode
// syntax, the budgets from calibration, the bytes, which blocks each head keeps (against a
// simulation of the rule written here in doubles), and attention over heads holding
// different positions (against softmax attention over the rows the cache reads back, with
// the query rotated back by the positions evicted after each key, computed here from the
// resident positions alone), on every ISA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "flatbuffers/flatbuffers.h"
#include "kernels/isa.h"
#include "runtime/kv/compressed_kv_cache.h"
#include "runtime/kv/kv_cache_spec.h"
#include "runtime/kv/kv_profile.h"
#include "schema/bundle_generated.h"
#include "tests/support/kv_test_arena.h"
#include "tests/support/kv_test_util.h"

namespace tern {
namespace {

using testing::kv_random_rows;
using Arena = testing::KvTestArena;

TEST(KvHeavyHitterModeTest, ParsesTheSuffix) {
  struct Case {
    const char* name;
    KvModeName::Kind kind;
    bool heavy_hitter, equal_shares;
    uint8_t recent_percent;
  };
  const Case cases[] = {
      {"q4/hh", KvModeName::Kind::Uniform, true, false, 90},
      {"adaptive:2.5/hh=equal", KvModeName::Kind::Adaptive, true, true, 90},
      {"fp16/hh", KvModeName::Kind::Exact, true, false, 90},
      {"q2/hh=equal@0%", KvModeName::Kind::Uniform, true, true, 0},
      {"k4v2/hh@100%", KvModeName::Kind::Uniform, true, false, 100},
      {"q4", KvModeName::Kind::Uniform, false, false, 90},
  };
  for (const Case& c : cases) {
    KvModeName parsed;
    ASSERT_EQ(parse_kv_mode(c.name, &parsed), Error::Ok) << c.name << ": " << last_error_message();
    EXPECT_EQ(parsed.kind, c.kind) << c.name;
    EXPECT_EQ(parsed.heavy_hitter, c.heavy_hitter) << c.name;
    EXPECT_EQ(parsed.equal_shares, c.equal_shares) << c.name;
    EXPECT_EQ(parsed.hh_recent_percent, c.recent_percent) << c.name;
  }
  KvModeName m;
  for (const char* bad : {"q4/", "q4/h", "q4/hh=", "q4/hh=eq", "/hh", "q4/hh>2@64", "q4>2@64/hh", "q4/hh/hh", "q5/hh",
                          "q4/hh@", "q4/hh@50", "q4/hh@101%", "q4/hh@-1%", "q4/hh@50%x", "q4/hh=equal@%"})
    EXPECT_EQ(parse_kv_mode(bad, &m), Error::InvalidArgument) << bad;

  ModelConfig config;
  config.layers = 2, config.kv_heads = 2, config.head_dim = 32, config.heads = 4, config.max_context = 512;
  KvHeadBits bits[4];
  KvModeRequest request;
  request.mode = "q4/hh";
  KvCacheSpec spec;
  ASSERT_EQ(make_kv_cache_spec(request, config, nullptr, bits, &spec), Error::Ok) << last_error_message();
  EXPECT_EQ(spec.profile.eviction, KvEviction::HeavyHitter);
  // No calibration: equal budgets; no head holds more than the context.
  for (const KvHeadBits& b : bits) EXPECT_EQ(b.block_share, kKvShareUnit);
  EXPECT_EQ(spec.profile.max_head_blocks, (512u - 4 - 32 - 32) / 32);
  KvCacheSpec plain;
  request.mode = "q4";
  ASSERT_EQ(make_kv_cache_spec(request, config, nullptr, bits, &plain), Error::Ok);
  EXPECT_NE(kv_layout_identity(spec, 484), kv_layout_identity(plain, 484));
  // An eviction policy cannot run with eviction off, nor without per-head storage.
  request.mode = "q4/hh";
  request.eviction = 0;
  EXPECT_EQ(make_kv_cache_spec(request, config, nullptr, bits, &spec), Error::InvalidArgument);
  request.eviction = -1;
  EXPECT_EQ(make_kv_cache_spec(request, config, nullptr, nullptr, &spec), Error::InvalidArgument);
}

// A calibrated profile of `entropies.size()` heads (one layer) with those attention entropies.
std::vector<uint8_t> calibrated_profile(const std::vector<float>& entropies) {
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<schema::KvHeadProfile>> heads;
  for (uint32_t h = 0; h < entropies.size(); ++h)
    heads.push_back(schema::CreateKvHeadProfile(fbb, 0, h, entropies[h], entropies[h], schema::KvClass::Mixed, 4, 4));
  fbb.Finish(schema::CreateKvProfile(fbb, fbb.CreateVector(heads), 4, 32, 32, 4.0f));
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

TEST(KvHeavyHitterBudgetTest, DiffuseHeadsGetMoreBlocksWithinTheSameBytes) {
  const std::vector<float> entropy = {0.0f, 0.05f, 1.0f, 2.0f, 4.0f, 4.0f};
  const std::vector<uint8_t> buffer = calibrated_profile(entropy);
  const auto* calibrated = flatbuffers::GetRoot<schema::KvProfile>(buffer.data());
  // Mixed widths (an exact head costs most), so the byte weighting matters.
  const KvHeadBits widths[6] = {{0, 0}, {4, 4}, {2, 2}, {4, 4}, {8, 8}, {2, 2}};
  KvCacheProfile p;
  p.shape = KvShape{1, 6, 64};
  p.eviction = KvEviction::HeavyHitter;
  p.head_bits = widths;
  KvHeadBits bits[6];
  ASSERT_EQ(kv_heavy_hitter_shares(calibrated, bits, &p), Error::Ok);
  ASSERT_EQ(p.head_bits, bits);
  double share_bytes = 0, bytes = 0;
  for (uint32_t h = 0; h < 6; ++h) {
    EXPECT_EQ(bits[h].key_bits, widths[h].key_bits);
    const double b = static_cast<double>(kv_head_block_bytes(p, bits[h]));
    share_bytes += bits[h].block_share * b;
    bytes += b;
  }
  // Never more bytes than equal budgets; less only by the rounding down (under a 32nd per head).
  EXPECT_LE(share_bytes, kKvShareUnit * bytes);
  EXPECT_GT(share_bytes, (kKvShareUnit - 1) * bytes);
  // More entropy, more blocks (as its square root); the two most focused heads both get the
  // floor (a quarter of the mean entropy); equal entropy, equal share whatever the width.
  EXPECT_EQ(bits[0].block_share, bits[1].block_share);
  EXPECT_LT(bits[1].block_share, bits[2].block_share);
  EXPECT_LT(bits[2].block_share, bits[3].block_share);
  EXPECT_LT(bits[3].block_share, bits[4].block_share);
  EXPECT_EQ(bits[4].block_share, bits[5].block_share);
  EXPECT_NEAR(static_cast<double>(bits[4].block_share) / bits[3].block_share, std::sqrt(2.0), 0.1);
  // Middles follow: M_h = M * share / 32 to the nearest block, capped.
  p.max_head_blocks = 9;
  for (uint32_t h = 0; h < 6; ++h)
    EXPECT_EQ(p.head_middle_blocks(bits[h], 7),
              std::min<uint64_t>(static_cast<uint64_t>(std::lround(7.0 * bits[h].block_share / 32)), 9))
        << h;
  // Without entropies: equal shares.
  ASSERT_EQ(kv_heavy_hitter_shares(nullptr, bits, &p), Error::Ok);
  for (const KvHeadBits& b : bits) EXPECT_EQ(b.block_share, kKvShareUnit);
}

// One layer of 4 heads (S 4, W 8, G 4): 4-bit, exact, 2-bit, 8/4-bit with shares giving
// them 5, 2, 0 and 3 of M = 3 middle blocks (the cap lets head 0 hold 5), in fewer bytes
// than 3 blocks each.
KvCacheProfile hh_profile(KvHeadBits* heads) {
  KvCacheProfile p = testing::small_kv_profile(KvEviction::HeavyHitter);
  p.max_head_blocks = 5;
  p.hh_recent_percent = 0;
  heads[0] = KvHeadBits{4, 4, 60};  // 3 * 60 / 32 = 5.6: 6, capped at 5
  heads[1] = KvHeadBits{0, 0, 22};  // 2.06: 2
  heads[2] = KvHeadBits{2, 2, 5};   // 0.47: 0
  heads[3] = KvHeadBits{8, 4, 32};  // 3
  p.head_bits = heads;
  return p;
}
const uint32_t kHeadBlocks[4] = {5, 2, 0, 3};

TEST(KvHeavyHitterBudgetTest, BytesAndCapacityPerHead) {
  KvHeadBits heads[4];
  KvCacheProfile p = hh_profile(heads);
  const uint32_t tokens = static_cast<uint32_t>(kv_tokens_for_blocks(p, 3));
  ASSERT_EQ(kv_resident_tokens(p, tokens), kv_tokens_for_blocks(p, 5));
  // The byte function covers what creation takes, misaligned or not.
  for (size_t misalign : {0, 8, 40}) {
    Arena a(kv_bytes_for_tokens(p, tokens), misalign);
    ASSERT_TRUE(CompressedKvCache::create(p, tokens, a.arena).ok()) << last_error_message();
  }
  // The middles take no more bytes than StreamingLLM's M = 3 blocks in every head.
  size_t middles = 0, equal = 0;
  for (uint32_t h = 0; h < 4; ++h) {
    middles += kHeadBlocks[h] * kv_head_block_bytes(p, heads[h]);
    equal += 3 * kv_head_block_bytes(p, heads[h]);
    EXPECT_EQ(kv_head_layout(p, heads[h], 3).tier1_blocks, kHeadBlocks[h]) << h;
  }
  EXPECT_LE(middles, equal);
  EXPECT_NEAR(kv_middle_bytes_per_token(p, 3) * 3 * 4, static_cast<double>(middles), 1e-6);
  // Each head holds S + M_h * G + W + G positions once the stream is long enough.
  Arena a(kv_bytes_for_tokens(p, tokens));
  auto cache = CompressedKvCache::create(p, tokens, a.arena);
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ((*cache)->capacity_tokens(), tokens);
  const auto x = kv_random_rows(100, 32, 3);
  for (uint32_t pos = 0; pos < 100; ++pos)
    for (uint32_t h = 0; h < 4; ++h) ASSERT_EQ((*cache)->write(0, h, pos, &x[pos * 32], &x[pos * 32]), Error::Ok);
  std::vector<uint32_t> kept((*cache)->resident_capacity());
  for (uint32_t h = 0; h < 4; ++h) {
    EXPECT_EQ((*cache)->resident_positions(0, h, kept.data()), 4 + kHeadBlocks[h] * 4 + 8 + (100 - 4 - 8 - 1) % 4 + 1)
        << h;
  }
}

// The rule, simulated in doubles over the rows the cache reads back: per head its blocks
// (first position, attention, query count at entry), the least mean attention per query row
// evicted (blocks no query scored stay; ties and none scored: the oldest).
struct SimulatedHead {
  struct Block {
    uint32_t first;
    double score;
    uint32_t since;
  };
  uint32_t slots = 0, queries = 0, recent_percent = 0;
  std::vector<Block> blocks;  // by position

  void flush(uint32_t first) {
    if (blocks.size() == slots && slots > 0) {
      size_t least = 0;
      double least_mean = 0;
      bool found = false;
      // The newest recent_percent % of the blocks are not candidates.
      const size_t candidates = blocks.size() - blocks.size() * recent_percent / 100;
      for (size_t i = 0; i < candidates; ++i) {
        const uint32_t seen = queries - blocks[i].since;
        if (seen == 0) continue;
        const double mean = blocks[i].score / seen;
        if (!found || mean < least_mean) least = i, least_mean = mean, found = true;
      }
      blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(least));
    }
    if (slots > 0) blocks.push_back(Block{first, 0.0, queries});
  }
};

// Positions < `end` a head keeps: sinks, its blocks, the window (W..W+G newest non-sinks).
std::vector<uint32_t> simulated_positions(const KvCacheProfile& p, const SimulatedHead& h, uint32_t end) {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < std::min(end, p.sink_tokens); ++i) out.push_back(i);
  for (const auto& b : h.blocks)
    for (uint32_t t = 0; t < p.block_tokens; ++t) out.push_back(b.first + t);
  const uint32_t n = end > p.sink_tokens ? end - p.sink_tokens : 0, ring = p.recent_window + p.block_tokens;
  const uint32_t window = n <= ring ? n : p.recent_window + (n - ring - 1) % p.block_tokens + 1;
  for (uint32_t pos = end - window; pos < end; ++pos) out.push_back(pos);
  return out;
}

// Softmax attention of `queries` rows over the kept positions' read-back rows, each query
// rotated back by the kept position's shift (none when rope is null), in doubles; the
// probabilities of each kept position summed over the query rows into `mass`.
std::vector<double> reference_attention(const std::vector<uint32_t>& kept, const std::vector<uint32_t>& shift,
                                        const std::vector<float>& keys, const std::vector<float>& values,
                                        const float* q, uint32_t queries, uint32_t D, float scale,
                                        const std::vector<float>* inv_freq, std::vector<double>* mass) {
  std::vector<double> out(static_cast<size_t>(queries) * D, 0.0);
  mass->assign(kept.size(), 0.0);
  for (uint32_t i = 0; i < queries; ++i) {
    std::vector<double> w(kept.size());
    double top = -1e300, sum = 0;
    for (size_t j = 0; j < kept.size(); ++j) {
      std::vector<double> qq(q + static_cast<size_t>(i) * D, q + static_cast<size_t>(i + 1) * D);
      if (inv_freq != nullptr && shift[j] > 0) {  // rotate-half RoPE by -shift
        for (uint32_t c = 0; c < D / 2; ++c) {
          const double angle = -static_cast<double>(shift[j]) * (*inv_freq)[c];
          const double a = qq[c], b = qq[c + D / 2];
          qq[c] = a * std::cos(angle) - b * std::sin(angle);
          qq[c + D / 2] = b * std::cos(angle) + a * std::sin(angle);
        }
      }
      double s = 0;
      for (uint32_t c = 0; c < D; ++c) s += qq[c] * keys[static_cast<size_t>(kept[j]) * D + c];
      w[j] = s * scale;
      top = std::max(top, w[j]);
    }
    for (double& x : w) sum += (x = std::exp(x - top));
    for (size_t j = 0; j < kept.size(); ++j) {
      (*mass)[j] += w[j] / sum;
      for (uint32_t c = 0; c < D; ++c)
        out[static_cast<size_t>(i) * D + c] += w[j] / sum * values[static_cast<size_t>(kept[j]) * D + c];
    }
  }
  return out;
}

// Independent standard normal rows (no shared direction, so one key can stand out).
std::vector<float> gaussian_rows(uint32_t rows, uint32_t dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows) * dim);
  for (float& v : x) v = normal(rng);
  return x;
}

class KvHeavyHitterIsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam(), cpu_features())) GTEST_SKIP() << to_string(GetParam()) << " not supported here";
  }
};

// A stream of 150 positions, two query rows per KV head attending after every write: each
// head keeps exactly the blocks the simulation keeps, and its output is the reference
// attention over them. Every query leans towards the key at position 9, so the block holding
// it stays in every head with a middle, long after StreamingLLM would have dropped it.
// With `rope`, queries are re-positioned: the shift of a kept position is the count of
// positions after it that the head evicted (computed from the kept list alone).
void run_stream(Isa isa, bool rope_on, uint8_t recent_percent) {
  KvHeadBits heads[4];
  KvCacheProfile p = hh_profile(heads);
  p.hh_recent_percent = recent_percent;
  const uint32_t D = 32, G = p.block_tokens, S = p.sink_tokens, total = 150;
  const uint32_t tokens = static_cast<uint32_t>(kv_tokens_for_blocks(p, 3));
  Arena arena(kv_bytes_for_tokens(p, tokens));
  auto created = CompressedKvCache::create(p, tokens, arena.arena);
  ASSERT_TRUE(created.ok()) << last_error_message();
  CompressedKvCache& cache = **created;
  cache.set_isa(isa);
  std::vector<float> inv_freq(D / 2);
  for (uint32_t c = 0; c < D / 2; ++c) inv_freq[c] = std::pow(10000.0f, -2.0f * c / D);
  const Rope rope{inv_freq.data(), false};
  std::vector<SimulatedHead> sim(4);
  for (uint32_t h = 0; h < 4; ++h) sim[h].slots = kHeadBlocks[h], sim[h].recent_percent = recent_percent;
  std::vector<std::vector<float>> keys, values;
  for (uint32_t h = 0; h < 4; ++h) {
    keys.push_back(gaussian_rows(total, D, 30 + h));
    values.push_back(kv_random_rows(total, D, 40 + h));
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  std::vector<float> scores(static_cast<size_t>(2) * cache.resident_capacity()), out(2 * D);
  std::vector<float> kr(static_cast<size_t>(total) * D), vr(kr.size());
  std::vector<uint32_t> kept(cache.resident_capacity());
  for (uint32_t pos = 0; pos < total; ++pos) {
    const auto noise = gaussian_rows(2, D, 1000 + pos);
    for (uint32_t h = 0; h < 4; ++h) {
      const uint32_t ring = p.recent_window + G;
      if (pos >= S && pos - S >= ring && (pos - S - ring) % G == 0) sim[h].flush(pos - ring);
      ASSERT_EQ(
          cache.write(0, h, pos, &keys[h][static_cast<size_t>(pos) * D], &values[h][static_cast<size_t>(pos) * D]),
          Error::Ok);
      std::vector<float> q(2 * D);
      for (uint32_t i = 0; i < 2 * D; ++i) q[i] = keys[h][9 * D + i % D] + noise[i];
      cache.attend(0, h, q.data(), nullptr, 2, pos + 1, scale, scores.data(), out.data(), rope_on ? &rope : nullptr);

      const std::vector<uint32_t> want = simulated_positions(p, sim[h], pos + 1);
      const uint32_t n = cache.resident_positions(0, h, kept.data());
      ASSERT_EQ(std::vector<uint32_t>(kept.begin(), kept.begin() + n), want) << "head " << h << " at " << pos;
      cache.read_keys(0, h, 0, pos + 1, kr.data());
      cache.read_values(0, h, 0, pos + 1, vr.data());
      // Positions after want[j] up to pos, less those kept.
      std::vector<uint32_t> shift(want.size());
      for (size_t j = 0; j < want.size(); ++j) shift[j] = pos - want[j] - static_cast<uint32_t>(want.size() - 1 - j);
      std::vector<double> mass;
      const auto ref =
          reference_attention(want, shift, kr, vr, q.data(), 2, D, scale, rope_on ? &inv_freq : nullptr, &mass);
      for (uint32_t i = 0; i < 2 * D; ++i)
        ASSERT_NEAR(out[i], ref[i], 2e-4 * (1 + std::fabs(ref[i]))) << "head " << h << " at " << pos << " out " << i;
      // The simulation's blocks gather the same attention.
      size_t j = std::min(pos + 1, S);
      for (auto& b : sim[h].blocks) {
        for (uint32_t t = 0; t < G; ++t) b.score += mass[j++];
      }
      sim[h].queries += 2;
    }
  }
  // The block holding position 9 ([8, 12): blocks start after the 4 sinks) stays.
  for (uint32_t h = 0; h < 4; ++h) {
    const uint32_t n = cache.resident_positions(0, h, kept.data());
    const bool has9 = std::find(kept.begin(), kept.begin() + n, 9u) != kept.begin() + n;
    // (Re-positioned queries turn away from the unrotated key 9: nothing to say there.)
    if (!rope_on && recent_percent == 0) {
      EXPECT_EQ(has9, kHeadBlocks[h] > 0) << "head " << h;
    }
    EXPECT_GT(cache.evicted_positions(0, h), 0u);
  }
  EXPECT_EQ(cache.evicted_positions(0), 0u) << "heads differ: the cache re-positions, not the forward pass";
}

TEST_P(KvHeavyHitterIsaTest, KeepsWhatEachHeadAttendsToAndAttendsOverIt) { run_stream(GetParam(), false, 0); }
TEST_P(KvHeavyHitterIsaTest, RepositionsQueriesOverTheGapsAndKeepsTheRecentShare) { run_stream(GetParam(), true, 50); }

INSTANTIATE_TEST_SUITE_P(Isa, KvHeavyHitterIsaTest, ::testing::ValuesIn(testing::all_kv_isas()), testing::kv_isa_name);

// Equal budgets with every block protected (@100%) drop the oldest block: StreamingLLM. The
// outputs are the same to the bit, the re-positioned sinks included (StreamingLLM is given
// the query rotated back by its evicted positions with the same Rope::rotate_back, as the
// forward pass does).
TEST(KvHeavyHitterCacheTest, EqualBudgetsKeepingEveryRecentBlockAreStreamingLlm) {
  KvHeadBits heads[4];
  KvCacheProfile p = hh_profile(heads);
  for (KvHeadBits& b : heads) b.block_share = kKvShareUnit;
  p.hh_recent_percent = 100;
  KvCacheProfile streaming = p;
  streaming.eviction = KvEviction::Streaming;
  const uint32_t D = 32, tokens = static_cast<uint32_t>(kv_tokens_for_blocks(p, 3));
  Arena a(kv_bytes_for_tokens(p, tokens)), b(kv_bytes_for_tokens(streaming, tokens));
  auto hh = CompressedKvCache::create(p, tokens, a.arena);
  auto sl = CompressedKvCache::create(streaming, tokens, b.arena);
  ASSERT_TRUE(hh.ok() && sl.ok());
  std::vector<float> inv_freq(D / 2), cos(D / 2), sin(D / 2);
  for (uint32_t c = 0; c < D / 2; ++c) inv_freq[c] = std::pow(10000.0f, -2.0f * c / D);
  const Rope rope{inv_freq.data(), false};
  const auto x = kv_random_rows(120, D, 11);
  std::vector<float> scores(2 * (*hh)->resident_capacity()), o1(2 * D), o2(2 * D), q_sinks(2 * D);
  for (uint32_t pos = 0; pos < 120; ++pos) {
    const auto q = gaussian_rows(2, D, 500 + pos);
    for (uint32_t h = 0; h < 4; ++h) {
      ASSERT_EQ((*hh)->write(0, h, pos, &x[pos * D], &x[((pos * 7) % 120) * D]), Error::Ok);
      ASSERT_EQ((*sl)->write(0, h, pos, &x[pos * D], &x[((pos * 7) % 120) * D]), Error::Ok);
      (*hh)->attend(0, h, q.data(), nullptr, 2, pos + 1, 0.2f, scores.data(), o1.data(), &rope);
      q_sinks = q;
      rope.rotate_back(q_sinks.data(), 2, D, (*sl)->evicted_positions(0, h), cos.data(), sin.data());
      (*sl)->attend(0, h, q.data(), q_sinks.data(), 2, pos + 1, 0.2f, scores.data(), o2.data());
      ASSERT_EQ(o1, o2) << "head " << h << " at " << pos;
      ASSERT_EQ((*hh)->evicted_positions(0, h), (*sl)->evicted_positions(0, h));
    }
  }
  EXPECT_GT((*sl)->evicted_positions(0, 0), 50u);
}

TEST(KvHeavyHitterCacheTest, SavedStateContinuesIdenticallyAndRollBackIsNotExact) {
  KvHeadBits heads[4];
  KvCacheProfile p = hh_profile(heads);
  const uint32_t D = 32, written = 61, more = 40;
  const uint32_t tokens = static_cast<uint32_t>(kv_tokens_for_blocks(p, 3));
  Arena a(kv_bytes_for_tokens(p, tokens)), b(kv_bytes_for_tokens(p, tokens));
  auto one = CompressedKvCache::create(p, tokens, a.arena);
  auto two = CompressedKvCache::create(p, tokens, b.arena);
  ASSERT_TRUE(one.ok() && two.ok());
  const auto x = kv_random_rows(written + more, D, 7);
  std::vector<float> scores(2 * (*one)->resident_capacity()), o1(2 * D), o2(2 * D);
  auto step = [&](CompressedKvCache& c, uint32_t pos, float* out) {
    for (uint32_t h = 0; h < 4; ++h) {
      ASSERT_EQ(c.write(0, h, pos, &x[static_cast<size_t>(pos) * D], &x[static_cast<size_t>(pos) * D]), Error::Ok);
      c.attend(0, h, &x[static_cast<size_t>(pos / 2) * D], nullptr, 1, pos + 1, 0.2f, scores.data(), out + (h % 2) * D);
    }
  };
  for (uint32_t pos = 0; pos < written; ++pos) step(**one, pos, o1.data());
  EXPECT_EQ((*one)->exact_append_room(), 0u);
  EXPECT_FALSE((*one)->rollback_is_exact(written - 1)) << "position 60's query already added its attention";
  std::vector<uint8_t> state((*one)->state_bytes(written));
  (*one)->save_state(written, state.data());
  EXPECT_EQ((*two)->load_state(written, state.data(), state.size() - 1), Error::CorruptFile);
  ASSERT_EQ((*two)->load_state(written, state.data(), state.size()), Error::Ok) << last_error_message();
  std::vector<uint32_t> k1((*one)->resident_capacity()), k2(k1.size());
  for (uint32_t pos = written; pos < written + more; ++pos) {
    step(**one, pos, o1.data());
    step(**two, pos, o2.data());
    ASSERT_EQ(o1, o2) << pos;
    for (uint32_t h = 0; h < 4; ++h) {
      const uint32_t n = (*one)->resident_positions(0, h, k1.data());
      ASSERT_EQ(n, (*two)->resident_positions(0, h, k2.data()));
      ASSERT_EQ(k1, k2) << "head " << h << " at " << pos;
    }
  }
}

}  // namespace
}  // namespace tern
