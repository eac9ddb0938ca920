// Sessions on the compressed per-head KV cache: closeness to the dense cache, attend()
// against reading rows back on the same cache, StreamingLLM eviction past the capacity and
// the re-positioned sink query (checked exactly on layer 0 against a fresh dense session).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/base/arena.h"
#include "runtime/engine/forward.h"
#include "runtime/engine/model.h"
#include "runtime/engine/session.h"
#include "runtime/kv/compressed_kv_cache.h"
#include "tests/support/bundle_util.h"
#include "tests/support/read_back_kv_cache.h"

namespace tern {
namespace {

constexpr const char* kAusten = "tiny-austen-packed.tern";
constexpr const char* kLlama = "bitllama2c-3M.tern";
constexpr const char* kLlamaSource = "models/bitllama2c-3M/bit_model.bin";

std::unique_ptr<Model> load(const char* bundle, ModelParams p) {
  auto m = Model::load(testing::bundle_path(bundle).c_str(), p);
  EXPECT_TRUE(m.ok()) << last_error_message();
  return m.ok() ? std::move(m).value() : nullptr;
}

ModelParams mode_params(const char* mode, int eviction, uint32_t ctx = 0) {
  ModelParams p;
  p.kv_mode = mode;
  p.kv_eviction = eviction;
  p.context_tokens = ctx;
  return p;
}

// Deterministic token ids in [3, vocab): a fixed LCG, no tokenizer needed.
std::vector<int32_t> tokens_for(uint32_t vocab, size_t n, uint32_t seed = 7) {
  std::vector<int32_t> t(n);
  uint32_t x = seed;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    t[i] = static_cast<int32_t>(3 + (x >> 8) % (vocab - 3));
  }
  t[0] = 1;  // BOS
  return t;
}

float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

float max_abs(const float* a, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i]));
  return m;
}

// Keeps the last token's layer-0 attention output (the AttentionObserver hook).
struct Layer0Capture {
  std::vector<float> last;  // the last token's layer-0 attention output
  size_t width = 0;
  static void on_output(void* user, uint32_t layer, uint32_t, uint32_t n, const float* att) {
    auto* self = static_cast<Layer0Capture*>(user);
    if (layer != 0) return;
    self->last.assign(att + (n - 1) * self->width, att + n * self->width);
  }
};

// Runs `tokens` through a session of `mode` one at a time, collecting every step's logits
// and, when `layer0` is given, every step's layer-0 attention output.
std::vector<float> logits_per_step(const char* bundle, const ModelParams& p, const std::vector<int32_t>& tokens,
                                   std::vector<float>* layer0 = nullptr) {
  auto model = load(bundle, p);
  if (model == nullptr) return {};
  auto session = model->create_session(SamplerParams{});
  EXPECT_TRUE(session.ok()) << last_error_message();
  if (!session.ok()) return {};
  Layer0Capture capture;
  capture.width = static_cast<size_t>(model->config().heads) * model->config().head_dim;
  AttentionObserver obs;
  obs.on_output = &Layer0Capture::on_output;
  obs.user = &capture;
  if (layer0 != nullptr) (*session)->set_attention_observer(&obs);
  const uint32_t vocab = model->config().vocab;
  std::vector<float> out;
  for (int32_t t : tokens) {
    EXPECT_EQ((*session)->decode(t), Error::Ok) << last_error_message();
    out.insert(out.end(), (*session)->logits(), (*session)->logits() + vocab);
    if (layer0 != nullptr) layer0->insert(layer0->end(), capture.last.begin(), capture.last.end());
  }
  model->destroy_session(*session);
  return out;
}

TEST(KvSession, ModesResolveAndReportTheirCache) {
  TERN_REQUIRE_BUNDLE(kAusten);
  auto dense = load(kAusten, ModelParams{});
  ASSERT_NE(dense, nullptr);
  EXPECT_FALSE(dense->kv_spec().compressed);
  EXPECT_STREQ(dense->kv_mode(), "f32");
  auto q4 = load(kAusten, mode_params("q4", -1));
  ASSERT_NE(q4, nullptr);
  ASSERT_TRUE(q4->kv_spec().compressed);
  EXPECT_EQ(q4->kv_spec().profile.uniform.key_bits, 4);
  EXPECT_EQ(q4->kv_spec().profile.eviction, KvEviction::Streaming);
  EXPECT_TRUE(q4->plan().kv_evicting);
  // The plan's KV bytes are the cache's exact byte function at the planned capacity.
  EXPECT_EQ(q4->plan().kv_bytes, kv_bytes_for_tokens(q4->kv_spec().profile, q4->plan().context_tokens));
  auto fp16_evict = load(kAusten, mode_params("fp16", 1));
  ASSERT_NE(fp16_evict, nullptr);
  ASSERT_TRUE(fp16_evict->kv_spec().compressed);
  EXPECT_TRUE(fp16_evict->kv_spec().profile.uniform.exact());
  EXPECT_EQ(fp16_evict->kv_spec().profile.exact_type, KvType::F16);
  auto fp16 = load(kAusten, mode_params("fp16", -1));
  ASSERT_NE(fp16, nullptr);
  EXPECT_FALSE(fp16->kv_spec().compressed);
  EXPECT_EQ(fp16->kv_spec().dense_type, KvType::F16);

  ModelParams p = mode_params("q4", -1);
  p.kv_sink_tokens = 2;
  p.kv_recent_window = 64;
  auto custom = load(kAusten, p);
  ASSERT_NE(custom, nullptr);
  EXPECT_EQ(custom->kv_spec().profile.sink_tokens, 2u);
  EXPECT_EQ(custom->kv_spec().profile.recent_window, 64u);

  for (const char* bad : {"q5", "q", "k4", "adaptive:1", "int8"}) {
    auto m = Model::load(testing::bundle_path(kAusten).c_str(), mode_params(bad, -1));
    EXPECT_EQ(m.error(), Error::InvalidArgument) << bad;
    EXPECT_NE(std::strstr(last_error_message(), "KV mode"), nullptr) << last_error_message();
  }
  auto m = Model::load(testing::bundle_path(kAusten).c_str(), mode_params("q4", 3));
  EXPECT_EQ(m.error(), Error::InvalidArgument);
}

// Per-step max |Δlogit| between two runs, sorted.
std::vector<float> step_diffs(const std::vector<float>& a, const std::vector<float>& b, uint32_t vocab) {
  std::vector<float> d;
  for (size_t s = 0; s + vocab <= a.size(); s += vocab) d.push_back(max_abs_diff(a.data() + s, b.data() + s, vocab));
  std::sort(d.begin(), d.end());
  return d;
}

// Activations are quantized to int8 per token before every ternary matmul, so a 1e-6
// difference in an attention output can flip one rounding and move the logits by ~0.1
// (the README's accuracy notes see the same). Logit comparisons therefore check the
// typical step at float tolerance and bound the rare flips; the layer-0 attention output
// (before any quantization) is compared strictly.

// A compressed cache whose every head is exact (f32) is the dense computation through
// other code (attend() kernels, segment layout); q8 and q4 stay close. The logits of two
// float-different paths part at the first int8 rounding flip, and the flipped step's KV rows
// then differ for every later step; where that first flip falls moves with any change to the
// float arithmetic and between architectures (tiny-austen, f32-exact: step 22 on x86, step 7
// under qemu's cortex-a72, past step 100 before the norms summed in 16 lanes). So the strict
// check is on what no flip reaches: layer 0's attention output, whose keys and values come
// from the embeddings alone, at every step. The logits are held to bounds that cover the flips.
// Measured over 200 steps (per-step max |Δlogit| median / max, top-1 agreement; x86 and
// aarch64): f32-exact 0.062–0.065 / 0.17–0.18, 198/200; q8 0.085–0.086 / 0.19–0.20,
// 193–196/200 (its exact rows are f16, which alone moves logits by ~0.05); q4 0.125 / 0.33,
// 191–196/200 (KV.md: q4 greedy 98.2 %).
TEST(KvSession, CompressedSessionsTrackTheDenseOne) {
  TERN_REQUIRE_BUNDLE(kAusten);
  auto probe = load(kAusten, ModelParams{});
  ASSERT_NE(probe, nullptr);
  const uint32_t vocab = probe->config().vocab;
  const size_t width = static_cast<size_t>(probe->config().heads) * probe->config().head_dim;
  const std::vector<int32_t> tokens = tokens_for(vocab, 200);  // > window: quantized blocks in use
  std::vector<float> dense_layer0;
  const std::vector<float> dense = logits_per_step(kAusten, ModelParams{}, tokens, &dense_layer0);
  ASSERT_EQ(dense.size(), tokens.size() * vocab);
  ASSERT_EQ(dense_layer0.size(), tokens.size() * width);
  struct Case {
    const char* mode;
    int eviction;
    float median;     // typical step
    float max;        // worst step
    size_t min_top1;  // of 200 steps
    bool exact;       // every head f32: layer 0's attention equals the dense one's to float rounding
  };
  for (const Case& c : {Case{"f32", 1, 0.15f, 0.5f, 194, true}, Case{"q8", 0, 0.15f, 0.5f, 190, false},
                        Case{"q4", 0, 0.25f, 1.0f, 185, false}}) {
    std::vector<float> layer0;
    const std::vector<float> got = logits_per_step(kAusten, mode_params(c.mode, c.eviction), tokens, &layer0);
    ASSERT_EQ(got.size(), dense.size()) << c.mode;
    ASSERT_EQ(layer0.size(), dense_layer0.size()) << c.mode;
    float layer0_worst = 0;
    for (size_t s = 0; s < tokens.size(); ++s) {
      const float* want = dense_layer0.data() + s * width;
      layer0_worst = std::max(
          layer0_worst, max_abs_diff(layer0.data() + s * width, want, width) / std::max(1e-6f, max_abs(want, width)));
    }
    const std::vector<float> d = step_diffs(got, dense, vocab);
    size_t same_top = 0;
    for (size_t s = 0; s < tokens.size(); ++s) {
      const float* a = dense.data() + s * vocab;
      const float* b = got.data() + s * vocab;
      same_top += std::max_element(a, a + vocab) - a == std::max_element(b, b + vocab) - b;
    }
    std::printf(
        "%s vs dense f32: per-step max |dlogit| median %.2e, max %.3f; top-1 equal at %zu/%zu steps; "
        "layer-0 attention relative error %.2e\n",
        c.mode, d[d.size() / 2], d.back(), same_top, tokens.size(), layer0_worst);
    if (c.exact) {
      EXPECT_LE(layer0_worst, 1e-5f) << c.mode << ": layer-0 attention outputs, relative";
    }
    EXPECT_LE(d[d.size() / 2], c.median) << c.mode;
    EXPECT_LE(d.back(), c.max) << c.mode;
    EXPECT_GE(same_top, c.min_top1) << c.mode;
  }
}

// The same forward pass, the same cache: attend() (quantized blocks read in place) and the
// read-back decorator (rows dequantized through KvCache, then a scalar loop) give the same
// logits, step by step, each step computed both ways on the identical cache state.
void attend_matches_read_back(const char* bundle, const char* mode, uint32_t batch) {
  auto model = load(bundle, mode_params(mode, 0, 200));
  ASSERT_NE(model, nullptr);
  const KvCacheSpec& spec = model->kv_spec();
  ASSERT_TRUE(spec.compressed);
  const ModelConfig& c = model->config();
  const uint32_t capacity = model->plan().context_tokens;
  const uint32_t group = c.heads / c.kv_heads;
  std::vector<uint8_t> memory(kv_cache_arena_bytes(spec, capacity));
  ArenaAllocator kv_arena(memory.data(), memory.size());
  auto made = create_kv_cache(spec, capacity, kv_arena);
  ASSERT_TRUE(made.ok()) << last_error_message();
  KvCache& kv = **made;
  testing::ReadBackKvCache read_back(kv);
  // One scratch big enough for both: the decorator needs every query head's scores.
  size_t bytes = 0;
  ForwardScratch scratch;
  const size_t scores = read_back.attention_scores_per_head(group);
  ASSERT_EQ(carve_forward_scratch(c, batch, scores, nullptr, &scratch, &bytes), Error::Ok);
  std::vector<uint8_t> scratch_memory(bytes);
  ArenaAllocator arena(scratch_memory.data(), scratch_memory.size());
  ASSERT_EQ(carve_forward_scratch(c, batch, scores, &arena, &scratch, &bytes), Error::Ok);
  const std::vector<int32_t> tokens = tokens_for(c.vocab, capacity - batch, 11);
  std::vector<float> a(c.vocab);
  float worst = 0, scale = 0;
  std::vector<float> steps;
  Layer0Capture att_a, att_b;
  att_a.width = att_b.width = static_cast<size_t>(c.heads) * c.head_dim;
  AttentionObserver obs_a, obs_b;
  obs_a.on_output = obs_b.on_output = &Layer0Capture::on_output;
  obs_a.user = &att_a;
  obs_b.user = &att_b;
  float layer0_worst = 0;
  for (uint32_t pos = 0; pos + batch <= tokens.size(); pos += batch) {
    scratch.observer = &obs_a;
    ASSERT_EQ(forward(*model, kv, scratch, tokens.data() + pos, batch, pos, true, nullptr), Error::Ok);
    std::memcpy(a.data(), scratch.logits, c.vocab * sizeof(float));
    ASSERT_EQ(kv.rollback_to(pos), Error::Ok) << last_error_message();
    scratch.observer = &obs_b;
    ASSERT_EQ(forward(*model, read_back, scratch, tokens.data() + pos, batch, pos, true, nullptr), Error::Ok);
    layer0_worst = std::max(layer0_worst, max_abs_diff(att_a.last.data(), att_b.last.data(), att_a.width) /
                                              std::max(1e-6f, max_abs(att_b.last.data(), att_b.width)));
    const float d = max_abs_diff(a.data(), scratch.logits, c.vocab);
    worst = std::max(worst, d);
    steps.push_back(d);
    scale = std::max(scale, max_abs(a.data(), c.vocab));
  }
  EXPECT_GT(kv.capacity_tokens(), 100u);
  std::sort(steps.begin(), steps.end());
  size_t exact_steps = 0;
  for (float d : steps) exact_steps += d <= 1e-4f * scale;
  std::printf(
      "%s %s batch %u: attend() vs read-back: per-step max |dlogit| median %.2e, max %.2e (largest |logit| "
      "%.2f), %zu/%zu steps within 1e-4 x that; layer-0 attention relative error %.2e\n",
      bundle, mode, batch, steps[steps.size() / 2], worst, scale, exact_steps, steps.size(), layer0_worst);
  // Most steps agree to float rounding; int8 flips stay small; layer 0 agrees strictly.
  EXPECT_GE(exact_steps * 4, steps.size() * 3);
  EXPECT_LE(worst, 0.3f);
  EXPECT_LE(layer0_worst, 1e-5f) << "layer-0 attention outputs, relative";
}

TEST(KvSession, AttendMatchesReadBackOnTheSameCache) {
  TERN_REQUIRE_BUNDLE(kAusten);
  attend_matches_read_back(kAusten, "q4", 1);
  attend_matches_read_back(kAusten, "q2", 8);
  attend_matches_read_back(kAusten, "k4v2", 1);
}

TEST(KvSession, AttendMatchesReadBackMultiHeadModel) {
  TERN_REQUIRE_SHARED_BUNDLE(kLlama, kLlamaSource);
  attend_matches_read_back(kLlama, "q3", 1);
  attend_matches_read_back(kLlama, "q8", 4);
}

TEST(KvSession, EvictionKeepsGeneratingPastTheCapacity) {
  TERN_REQUIRE_BUNDLE(kAusten);
  auto model = load(kAusten, mode_params("q4", -1, 132));
  ASSERT_NE(model, nullptr);
  auto made = model->create_session(SamplerParams{});
  ASSERT_TRUE(made.ok()) << last_error_message();
  Session& s = **made;
  const uint32_t capacity = s.context_tokens();
  EXPECT_EQ(capacity, 132u);  // 4 sinks + 2 blocks of 32 + window 32 + 32
  EXPECT_TRUE(s.evicting());
  // A prompt three times the capacity runs in batches, evicting as it goes.
  const std::vector<int32_t> tokens = tokens_for(model->config().vocab, 3 * capacity + 5, 3);
  ASSERT_EQ(s.prefill(tokens.data(), tokens.size()), Error::Ok) << last_error_message();
  EXPECT_EQ(s.position(), tokens.size());
  // The history slides: at least the last `capacity` tokens, oldest first.
  ASSERT_GE(s.history_size(), capacity);
  ASSERT_LE(s.history_size(), 2 * capacity);
  for (uint32_t i = 1; i <= capacity; ++i) EXPECT_EQ(s.history()[s.history_size() - i], tokens[tokens.size() - i]);
  for (int i = 0; i < 300; ++i) {
    auto next = s.sample();
    ASSERT_TRUE(next.ok());
    ASSERT_EQ(s.decode(*next), Error::Ok) << "step " << i << ": " << last_error_message();
  }
  EXPECT_EQ(s.position(), tokens.size() + 300);
  const CompressedKvCache* kv = s.kv_cache().compressed();
  ASSERT_NE(kv, nullptr);
  EXPECT_GT(kv->evicted_blocks(), 0u);
  // Kept: sinks 0..3, then a contiguous run ending at the last position.
  std::vector<uint32_t> kept(capacity);
  const uint32_t n = kv->resident_positions(0, 0, kept.data());
  ASSERT_GE(n, 4u + 32u);
  EXPECT_LE(n, capacity);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(kept[i], i);
  EXPECT_EQ(kept[n - 1], s.position() - 1);
  for (uint32_t i = 5; i < n; ++i) EXPECT_EQ(kept[i], kept[i - 1] + 1);
  EXPECT_EQ(kept[4], 4 + kv->evicted_positions(0, 0));
  EXPECT_GE(s.history_size(), capacity);

  // reset() forgets everything: the same prompt gives the same logits again.
  s.reset();
  ASSERT_EQ(s.prefill(tokens.data(), 40), Error::Ok);
  std::vector<float> first(s.logits(), s.logits() + model->config().vocab);
  s.reset();
  ASSERT_EQ(s.prefill(tokens.data(), 40), Error::Ok);
  EXPECT_EQ(max_abs_diff(first.data(), s.logits(), first.size()), 0.0f);
  model->destroy_session(&s);
}

// Heavy-hitter eviction through the forward pass. With equal budgets and every block
// protected (@100%) it drops the oldest block, and the cache's own re-positioning of the
// sinks (KvAttention::rope) stands in for the forward pass's q_sinks: a session past the
// capacity gives StreamingLLM's logits at every step. With calibrated budgets, heads keep
// different positions and the session still generates.
TEST(KvSession, HeavyHitterEvictionMatchesStreamingLlmWhenItEvictsTheOldest) {
  TERN_REQUIRE_BUNDLE("tiny-austen-calibrated.tern");
  const char* bundle = "tiny-austen-calibrated.tern";
  const std::vector<int32_t> tokens = tokens_for(2048, 300, 5);
  const auto streaming = logits_per_step(bundle, mode_params("q4", -1, 132), tokens);
  const auto hh = logits_per_step(bundle, mode_params("q4/hh=equal@100%", -1, 132), tokens);
  ASSERT_EQ(streaming.size(), hh.size());
  ASSERT_FALSE(hh.empty());
  // (Equal to the bit natively; aarch64 may fuse the two rotations' multiply-adds differently.)
  EXPECT_LE(max_abs_diff(streaming.data(), hh.data(), hh.size()), 1e-3f * max_abs(streaming.data(), streaming.size()));

  auto model = load(bundle, mode_params("q4/hh", -1, 132));
  ASSERT_NE(model, nullptr);
  auto made = model->create_session(SamplerParams{});
  ASSERT_TRUE(made.ok()) << last_error_message();
  Session& s = **made;
  ASSERT_EQ(s.prefill(tokens.data(), tokens.size()), Error::Ok) << last_error_message();
  const CompressedKvCache* kv = s.kv_cache().compressed();
  ASSERT_NE(kv, nullptr);
  std::vector<uint32_t> kept(kv->resident_capacity());
  bool differ = false;
  const uint32_t n0 = kv->resident_positions(0, 0, kept.data());
  std::vector<uint32_t> first(kept.begin(), kept.begin() + n0);
  for (uint32_t l = 0; l < model->config().layers; ++l)
    for (uint32_t h = 0; h < model->config().kv_heads; ++h) {
      const uint32_t n = kv->resident_positions(l, h, kept.data());
      differ = differ || std::vector<uint32_t>(kept.begin(), kept.begin() + n) != first;
    }
  EXPECT_TRUE(differ) << "calibrated budgets: heads hold different positions";
  EXPECT_EQ(s.kv_cache().exact_append_room(), 0u);
  model->destroy_session(&s);
}

TEST(KvSession, WithoutEvictionTheCapacityIsAHardLimit) {
  TERN_REQUIRE_BUNDLE(kAusten);
  auto model = load(kAusten, mode_params("q4", 0, 132));
  ASSERT_NE(model, nullptr);
  auto made = model->create_session(SamplerParams{});
  ASSERT_TRUE(made.ok());
  Session& s = **made;
  EXPECT_FALSE(s.evicting());
  const std::vector<int32_t> tokens = tokens_for(model->config().vocab, s.context_tokens() + 1, 5);
  EXPECT_EQ(s.prefill(tokens.data(), tokens.size()), Error::PromptTooLong);
  EXPECT_NE(std::strstr(last_error_message(), "eviction is off"), nullptr) << last_error_message();
  EXPECT_EQ(s.position(), 0u);
  ASSERT_EQ(s.prefill(tokens.data(), tokens.size() - 1), Error::Ok);
  EXPECT_EQ(s.decode(tokens.back()), Error::ContextFull);
  model->destroy_session(&s);
}

// An abort mid-batch leaves some layers written: the compressed cache rolls back, so the
// session continues exactly as if the aborted batch had never run.
TEST(KvSession, AbortedBatchRollsBack) {
  TERN_REQUIRE_BUNDLE(kAusten);
  auto model = load(kAusten, mode_params("q4", -1, 200));
  ASSERT_NE(model, nullptr);
  auto made = model->create_session(SamplerParams{});
  ASSERT_TRUE(made.ok());
  Session& s = **made;
  const std::vector<int32_t> tokens = tokens_for(model->config().vocab, 100, 9);
  ASSERT_EQ(s.prefill(tokens.data(), 90), Error::Ok);
  s.request_abort();
  EXPECT_EQ(s.decode(tokens[90]), Error::Aborted);
  s.clear_abort();
  ASSERT_EQ(s.prefill(tokens.data() + 90, 10), Error::Ok) << last_error_message();
  std::vector<float> resumed(s.logits(), s.logits() + model->config().vocab);
  s.reset();
  ASSERT_EQ(s.prefill(tokens.data(), 100), Error::Ok);
  EXPECT_LT(max_abs_diff(resumed.data(), s.logits(), resumed.size()), 1e-4f);
  model->destroy_session(&s);
}

// Layer 0's attention depends only on the tokens and their positions, so after eviction it
// can be checked exactly: with the sink query re-positioned, the evicting session's layer-0
// output for the last token equals a fresh dense session's over the kept tokens renumbered
// 0..k-1 (StreamingLLM's "positions within the cache"). Without it, it does not.
float layer0_error(bool reposition) {
  auto model = load(kAusten, mode_params("f32", 1, 132));  // exact f32 heads: no quantization error
  if (model == nullptr) return -1;
  const ModelConfig& c = model->config();
  const std::vector<int32_t> tokens = tokens_for(c.vocab, 700, 13);
  auto made = model->create_session(SamplerParams{});
  if (!made.ok()) return -1;
  Session& s = **made;
  s.forward_scratch().reposition_sinks = reposition;
  Layer0Capture got;
  got.width = static_cast<size_t>(c.heads) * c.head_dim;
  AttentionObserver obs;
  obs.on_output = &Layer0Capture::on_output;
  obs.user = &got;
  EXPECT_EQ(s.prefill(tokens.data(), tokens.size() - 1), Error::Ok);
  s.set_attention_observer(&obs);
  EXPECT_EQ(s.decode(tokens.back()), Error::Ok);
  const CompressedKvCache* kv = s.kv_cache().compressed();
  std::vector<uint32_t> kept(s.context_tokens());
  const uint32_t n = kv->resident_positions(0, 0, kept.data());
  EXPECT_GT(kv->evicted_positions(0, 0), 400u);
  std::vector<int32_t> renumbered;
  for (uint32_t i = 0; i < n; ++i) renumbered.push_back(tokens[kept[i]]);
  model->destroy_session(&s);

  auto dense = load(kAusten, ModelParams{});
  auto fresh = dense->create_session(SamplerParams{});
  if (!fresh.ok()) return -1;
  Layer0Capture want;
  want.width = got.width;
  AttentionObserver obs2 = obs;
  obs2.user = &want;
  (*fresh)->set_attention_observer(&obs2);
  EXPECT_EQ((*fresh)->prefill(renumbered.data(), renumbered.size()), Error::Ok);
  dense->destroy_session(*fresh);
  if (got.last.size() != want.last.size() || got.last.empty()) return -1;
  return max_abs_diff(got.last.data(), want.last.data(), got.last.size()) /
         std::max(1e-6f, max_abs(want.last.data(), want.last.size()));
}

TEST(KvSession, SinkQueryIsRepositionedWithinTheCache) {
  TERN_REQUIRE_BUNDLE(kAusten);
  const float with = layer0_error(true);
  const float without = layer0_error(false);
  std::printf(
      "layer-0 attention vs fresh dense session on the kept tokens: relative error %.2e re-positioned, "
      "%.2e not\n",
      with, without);
  ASSERT_GE(with, 0.0f);
  EXPECT_LT(with, 1e-4f);
  EXPECT_GT(without, 100 * std::max(with, 1e-6f));
}

}  // namespace
}  // namespace tern
