// The shape of a compressed KV cache and its byte math: how many bytes a given number
// of positions costs at a per-head precision profile, how many positions fit in a
// byte budget, and which positions are kept when the context outgrows it.
//
// Token layout (the same for every (layer, kv head), so eviction keeps heads aligned):
//   [S sink tokens, exact] [M quantized blocks of G tokens] [window ring of W+G exact slots]
// A token enters the window; when a write finds the window full (W+G tokens), the oldest
// G leave it as one quantized block, so the most recent W..W+G tokens are always exact.
//
// Aging (optional second tier): the middle is two rings, [tier 2: M2 aged blocks] [tier 1:
// M1 blocks]. A block leaving the window enters tier 1 at the head's width; when tier 1 is
// full (T1 = ceil(aged_after_tokens / G) blocks, or aged_after_percent of the middle's M
// blocks rounded down, at least 1) its oldest block's stored codes are truncated to the
// head's aged width, min(width, aged_bits) for keys and values (kernels/kv_quant.h,
// kv_truncate_*), and it enters tier 2. Exact heads and sink tokens stay as they are. Of M
// middle blocks, tier 1 holds min(M, T1) and tier 2 the rest, so capacity is still
// S + M*G + W + G and the byte function counts each tier at its own width.
//
// Eviction (StreamingLLM): when a block must enter a full middle (with aging: a full tier 2;
// tier 1 when tier 2 has no room at all), the oldest block is dropped. Sinks (positions
// 0..S-1) are never dropped, so position 0 always stays.
//
// Heavy-hitter eviction (per-head token budgets, H2O-like): each head has a middle of its
// own size, M_h = min(round(M * share_h / 32), max_head_blocks) blocks, where share_h (a
// head's KvHeadBits::block_share) comes from calibration: diffuse heads (high attention
// entropy) get more blocks, focused ones fewer, with the byte-weighted mean share at most
// 32, so the middles take about the bytes of the same mode with StreamingLLM eviction at
// the same M (the byte function counts the real M_h, so a budget is never exceeded; the
// planner's ladder is over M). Every middle block carries the attention its
// head's queries paid it since it left the window (probabilities summed over the GQA
// group's query heads); a block leaving the window into a full middle replaces the block
// with the least mean attention per query among the head's older blocks (the newest
// hh_recent_percent % of its middle are kept, as H2O keeps recent tokens; so are blocks no
// query scored yet; ties and no candidate: the oldest). So heads hold different positions: a per-head block map (first
// position of each slot, slots in position order) says which. Keys are cached after RoPE at their original positions:
// relative distances between the query and every kept middle/window token stay right after eviction (and are bounded by
// the capacity), with nothing to re-rotate.
//
// Sink positions (StreamingLLM's "positions within the cache"): the distance from a query
// at position p to the sinks would grow without bound, past the model's trained context.
// So once E non-sink positions were dropped (CompressedKvCache::evicted_positions()), the
// forward pass scores the sinks with a second copy of the query rotated by -E positions
// (RoPE composes: R(p-E) = R(-E)R(p)), i.e. as if it stood at p - E, right after the
// sinks and the kept tokens; inside the Hadamard basis when the head is rotated, since
// attend() rotates both copies alike. Every other kept token is scored with the query at
// p. The result equals a fresh session over the kept tokens renumbered 0..k-1 on layer 0
// (tests/runtime/kv/kv_session_test.cpp); TERN_KV_NO_SINK_REPOSITION=1 turns it off to measure.
//
// Sessions with eviction: positions are uint32 and may exceed the capacity; a prefill
// batch past the capacity evicts as it goes (its earlier tokens see the cache as it is
// after the whole batch was written); the token history for the repetition penalty is a
// sliding window of at least the capacity.
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/error.h"
#include "runtime/kv/kv_cache.h"

namespace tern {

enum class KvEviction : uint32_t {
  None = 0,         // writes past the capacity fail
  Streaming = 1,    // keep sinks + recent window, drop the oldest middle block
  HeavyHitter = 2,  // per-head middles, drop the block the head attends to least
};

// KvHeadBits::block_share of a head holding exactly the cache's mean middle.
inline constexpr uint8_t kKvShareUnit = 32;

// Bits of one (layer, kv head). {0, 0} = exact head (unquantized, the cache's exact type).
struct KvHeadBits {
  uint8_t key_bits = 4;
  uint8_t value_bits = 4;
  // Heavy-hitter eviction: the head's middle blocks in 32nds of the cache's M (ignored otherwise).
  uint8_t block_share = kKvShareUnit;
  bool exact() const { return key_bits == 0 && value_bits == 0; }
};

struct KvCacheProfile {
  KvShape shape;
  KvType exact_type = KvType::F16;  // sinks, the recent window and exact heads
  uint32_t sink_tokens = 4;
  uint32_t recent_window = 32;
  uint32_t block_tokens = 32;  // G: key block length and the window's flush unit
  uint32_t value_group = 32;   // channels per value scale (multiple of 8)
  bool rotate = true;          // Hadamard rotation on quantized heads when head_dim is a power of two
  KvEviction eviction = KvEviction::Streaming;
  // layers * kv_heads entries, [layer][kv_head]; null: every head at `uniform`.
  const KvHeadBits* head_bits = nullptr;
  KvHeadBits uniform;
  // Aging: 0 = off; else blocks older than the exact window plus `aged_after_tokens` tokens
  // (rounded up to whole blocks), or past the newest `aged_after_percent` % of the middle
  // blocks (when non-zero), are kept at most `aged_bits` wide.
  uint8_t aged_bits = 0;
  uint32_t aged_after_tokens = 0;
  uint8_t aged_after_percent = 0;
  // Heavy-hitter eviction: no head holds more middle blocks than this (the model's context
  // less the sinks and window, so re-positioned distances stay within it); 0: no cap.
  uint32_t max_head_blocks = 0;
  // Heavy-hitter eviction: the newest share of a head's middle blocks that is never evicted
  // (H2O's recent tokens); the least attended block goes among the older ones.
  uint8_t hh_recent_percent = 90;

  KvHeadBits bits_of(uint32_t layer, uint32_t kv_head) const {
    return head_bits ? head_bits[static_cast<size_t>(layer) * shape.kv_heads + kv_head] : uniform;
  }
  bool aging() const { return aged_bits != 0; }
  // The width a head's blocks take in tier 2 (its own width when aging is off or it is exact).
  KvHeadBits aged_bits_of(KvHeadBits bits) const {
    if (!aging() || bits.exact()) return bits;
    return KvHeadBits{bits.key_bits < aged_bits ? bits.key_bits : aged_bits,
                      bits.value_bits < aged_bits ? bits.value_bits : aged_bits};
  }
  // Tier-1 blocks (T1): all middle blocks when aging is off.
  uint64_t tier1_blocks(uint64_t middle_blocks) const {
    if (!aging()) return middle_blocks;
    uint64_t t1 = (static_cast<uint64_t>(aged_after_tokens) + block_tokens - 1) / block_tokens;
    if (aged_after_percent != 0) {
      // Rounded down so the middle averages at most the share at full width; at least one
      // block (a block enters tier 1 before it can age).
      t1 = middle_blocks / 100 * aged_after_percent + middle_blocks % 100 * aged_after_percent / 100;
      if (t1 == 0) t1 = 1;
    }
    return middle_blocks < t1 ? middle_blocks : t1;
  }
  // Middle blocks a head holds when the cache's middle is `middle_blocks` (M_h above).
  uint64_t head_middle_blocks(KvHeadBits bits, uint64_t middle_blocks) const {
    if (eviction != KvEviction::HeavyHitter) return middle_blocks;
    const uint64_t m = (2 * middle_blocks * bits.block_share + kKvShareUnit) / (2 * kKvShareUnit);  // nearest
    return max_head_blocks != 0 && m > max_head_blocks ? max_head_blocks : m;
  }
};

Error kv_profile_validate(const KvCacheProfile& profile);

// Bytes one middle block of G tokens costs in one head (keys + values).
size_t kv_head_block_bytes(const KvCacheProfile& profile, KvHeadBits bits);
// Positions held without eviction for `middle_blocks` blocks: S + M*G + W + G.
uint64_t kv_tokens_for_blocks(const KvCacheProfile& profile, uint64_t middle_blocks);
// Fewest middle blocks holding `tokens` positions.
uint64_t kv_blocks_for_tokens(const KvCacheProfile& profile, uint64_t tokens);
// Heavy-hitter eviction's KvCacheProfile::max_head_blocks for a model trained on `context`
// positions: the most middle blocks with S + M*G + W + G <= context (at least 1; 0 when
// the context is unknown, i.e. 0).
uint32_t kv_heavy_hitter_max_blocks(const KvCacheProfile& profile, uint32_t context);
// The most positions one head holds in a cache built for `tokens` (heavy-hitter eviction:
// heads' middles differ; otherwise every head holds the cache's capacity).
uint64_t kv_resident_tokens(const KvCacheProfile& profile, uint64_t tokens);

// Arena bytes (object, tables, storage, alignment slack included) for a cache holding
// `tokens` positions without eviction: creating it in an arena with this many free
// bytes always succeeds, whatever the arena's alignment.
size_t kv_bytes_for_tokens(const KvCacheProfile& profile, uint64_t tokens);
// Marginal bytes per position over all layers and heads (middle storage / G; with aging,
// tier 2's: what one more block costs past the tier-1 region).
double kv_bytes_per_token(const KvCacheProfile& profile);
// Mean bytes per middle position of a cache with `middle_blocks` blocks (tier 1 and tier 2
// at their widths; without aging, kv_bytes_per_token).
double kv_middle_bytes_per_token(const KvCacheProfile& profile, uint64_t middle_blocks);
// Marginal bits per stored element (keys and values, scales included).
double kv_average_bits(const KvCacheProfile& profile);

// Where each part of one head's storage lives (offsets from the head's base, in bytes).
struct KvHeadLayout {
  size_t sink_keys = 0, sink_values = 0;      // S rows each
  size_t window_keys = 0, window_values = 0;  // W+G rows each
  // M key blocks, then M value blocks: attention's score pass and value pass each
  // stream one contiguous region (interleaving them halved the streamed bandwidth).
  size_t middle_keys = 0, middle_values = 0;
  size_t key_block_bytes = 0, value_block_bytes = 0;
  // Tier 2 (aging): its key blocks, then its value blocks, after tier 1.
  size_t aged_keys = 0, aged_values = 0;
  size_t aged_key_block_bytes = 0, aged_value_block_bytes = 0;
  uint64_t tier1_blocks = 0, tier2_blocks = 0;
  // Heavy-hitter eviction: per middle slot its first position, attention sum (float) and
  // the head's query count when it entered, then the slots in position order (4 bytes each).
  size_t block_map = 0;
  size_t total = 0;  // padded for SIMD over-reads, 64-aligned
};
KvHeadLayout kv_head_layout(const KvCacheProfile& profile, KvHeadBits bits, uint64_t middle_blocks);

}  // namespace tern
