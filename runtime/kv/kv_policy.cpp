#include "runtime/kv/kv_policy.h"

#include <cstdlib>
#include <cstring>

#include "kernels/kv_quant.h"

namespace tern {

namespace {

constexpr size_t kAlign = 64;

size_t exact_bytes(KvType type) { return type == KvType::F16 ? 2 : 4; }

}  // namespace

Error kv_profile_validate(const KvCacheProfile& p) {
  const KvShape& s = p.shape;
  TERN_CHECK_OR_RETURN(s.layers > 0 && s.kv_heads > 0 && s.head_dim > 0 && s.head_dim <= kKvMaxHeadDim,
                       Error::InvalidArgument, "KV shape %u layers x %u heads x %u dims", s.layers, s.kv_heads,
                       s.head_dim);
  TERN_CHECK_OR_RETURN(p.block_tokens > 0, Error::InvalidArgument, "KV block of 0 tokens");
  TERN_CHECK_OR_RETURN(p.value_group > 0 && p.value_group % 8 == 0, Error::InvalidArgument,
                       "KV value group %u is not a positive multiple of 8", p.value_group);
  for (uint32_t l = 0; l < s.layers; ++l) {
    for (uint32_t h = 0; h < s.kv_heads; ++h) {
      const KvHeadBits b = p.bits_of(l, h);
      if (b.exact()) continue;
      TERN_CHECK_OR_RETURN(kv_bits_supported(b.key_bits) && kv_bits_supported(b.value_bits), Error::InvalidArgument,
                           "KV head %u.%u: %u/%u bits (supported: 2, 3, 4, 8, or 0/0 for exact)", l, h, b.key_bits,
                           b.value_bits);
    }
  }
  TERN_CHECK_OR_RETURN(p.eviction != KvEviction::HeavyHitter || !p.aging(), Error::InvalidArgument,
                       "KV heavy-hitter eviction with aging tiers: not supported together (pick one)");
  if (p.aging()) {
    TERN_CHECK_OR_RETURN(kv_bits_supported(p.aged_bits), Error::InvalidArgument,
                         "KV aging to %u bits (supported: 2, 3, 4, 8)", p.aged_bits);
    TERN_CHECK_OR_RETURN((p.aged_after_tokens > 0) != (p.aged_after_percent > 0) && p.aged_after_percent <= 100,
                         Error::InvalidArgument,
                         "KV aging after %u tokens / %u %%: one of them, tokens > 0 or 1..100 %% of the middle",
                         p.aged_after_tokens, p.aged_after_percent);
  }
  return Error::Ok;
}

size_t kv_head_block_bytes(const KvCacheProfile& p, KvHeadBits bits) {
  const uint32_t D = p.shape.head_dim, G = p.block_tokens;
  if (bits.exact()) return 2 * static_cast<size_t>(G) * D * exact_bytes(p.exact_type);
  return kv_key_block_bytes(bits.key_bits, D, G) + G * kv_value_row_bytes(bits.value_bits, D, p.value_group);
}

KvHeadLayout kv_head_layout(const KvCacheProfile& p, KvHeadBits bits, uint64_t middle_blocks) {
  const size_t row = static_cast<size_t>(p.shape.head_dim) * exact_bytes(p.exact_type);
  KvHeadLayout l;
  size_t at = 0;
  l.sink_keys = at;
  at += p.sink_tokens * row;
  l.sink_values = at;
  at += p.sink_tokens * row;
  l.window_keys = at;
  at += (static_cast<size_t>(p.recent_window) + p.block_tokens) * row;
  l.window_values = at;
  at += (static_cast<size_t>(p.recent_window) + p.block_tokens) * row;
  const uint32_t D = p.shape.head_dim, G = p.block_tokens;
  auto block_bytes = [&](KvHeadBits b, size_t* keys, size_t* values) {
    if (b.exact()) {
      *keys = *values = static_cast<size_t>(G) * row;
    } else {
      *keys = kv_key_block_bytes(b.key_bits, D, G);
      *values = G * kv_value_row_bytes(b.value_bits, D, p.value_group);
    }
  };
  block_bytes(bits, &l.key_block_bytes, &l.value_block_bytes);
  block_bytes(p.aged_bits_of(bits), &l.aged_key_block_bytes, &l.aged_value_block_bytes);
  const uint64_t head_blocks = p.head_middle_blocks(bits, middle_blocks);
  l.tier1_blocks = p.tier1_blocks(head_blocks);
  l.tier2_blocks = head_blocks - l.tier1_blocks;
  l.middle_keys = at;
  at += l.tier1_blocks * l.key_block_bytes;
  l.middle_values = at;
  at += l.tier1_blocks * l.value_block_bytes;
  l.aged_keys = at;
  at += l.tier2_blocks * l.aged_key_block_bytes;
  l.aged_values = at;
  at += l.tier2_blocks * l.aged_value_block_bytes;
  if (p.eviction == KvEviction::HeavyHitter) {
    l.block_map = at;
    at += 4 * head_blocks * sizeof(uint32_t);
  }
  l.total = align_up(at + kKvReadPadding, kAlign);
  return l;
}

uint64_t kv_tokens_for_blocks(const KvCacheProfile& p, uint64_t middle_blocks) {
  return p.sink_tokens + middle_blocks * p.block_tokens + p.recent_window + p.block_tokens;
}

uint64_t kv_blocks_for_tokens(const KvCacheProfile& p, uint64_t tokens) {
  const uint64_t fixed = kv_tokens_for_blocks(p, 0);
  return tokens <= fixed ? 0 : (tokens - fixed + p.block_tokens - 1) / p.block_tokens;
}

uint32_t kv_heavy_hitter_max_blocks(const KvCacheProfile& p, uint32_t context) {
  if (context == 0) return 0;
  const uint64_t fixed = kv_tokens_for_blocks(p, 0);
  const uint64_t blocks = context > fixed ? (context - fixed) / p.block_tokens : 0;
  return blocks > 1 ? static_cast<uint32_t>(blocks) : 1;
}

uint64_t kv_resident_tokens(const KvCacheProfile& p, uint64_t tokens) {
  const uint64_t blocks = kv_blocks_for_tokens(p, tokens);
  if (p.eviction != KvEviction::HeavyHitter) return kv_tokens_for_blocks(p, blocks);
  uint64_t most = 0;
  for (uint32_t l = 0; l < p.shape.layers; ++l)
    for (uint32_t h = 0; h < p.shape.kv_heads; ++h) {
      const uint64_t m = p.head_middle_blocks(p.bits_of(l, h), blocks);
      most = m > most ? m : most;
    }
  return kv_tokens_for_blocks(p, most);
}

namespace {

// Object + per-head table + storage for M middle blocks, plus worst-case alignment slack.
size_t bytes_for_blocks(const KvCacheProfile& p, uint64_t blocks, size_t object_bytes, size_t head_state_bytes) {
  const size_t heads = static_cast<size_t>(p.shape.layers) * p.shape.kv_heads;
  size_t total = kAlign + align_up(object_bytes, kAlign) + align_up(heads * head_state_bytes, kAlign) +
                 align_up(heads * sizeof(KvHeadBits), kAlign);
  total += align_up(static_cast<size_t>(p.block_tokens) * p.shape.head_dim * sizeof(float) * 2, kAlign);  // flush
  for (uint32_t l = 0; l < p.shape.layers; ++l)
    for (uint32_t h = 0; h < p.shape.kv_heads; ++h) total += kv_head_layout(p, p.bits_of(l, h), blocks).total;
  return total;
}

}  // namespace

// Defined in compressed_kv_cache.cpp (sizes of its object and per-head state).
size_t kv_compressed_object_bytes();
size_t kv_compressed_head_state_bytes();

size_t kv_bytes_for_tokens(const KvCacheProfile& p, uint64_t tokens) {
  return bytes_for_blocks(p, kv_blocks_for_tokens(p, tokens), kv_compressed_object_bytes(),
                          kv_compressed_head_state_bytes());
}

double kv_bytes_per_token(const KvCacheProfile& p) {
  double total = 0;
  for (uint32_t l = 0; l < p.shape.layers; ++l)
    for (uint32_t h = 0; h < p.shape.kv_heads; ++h) {
      const KvHeadBits b = p.bits_of(l, h);
      const double share = p.eviction == KvEviction::HeavyHitter ? b.block_share / double{kKvShareUnit} : 1.0;
      total += share * static_cast<double>(kv_head_block_bytes(p, p.aged_bits_of(b)));
    }
  return total / p.block_tokens;
}

double kv_middle_bytes_per_token(const KvCacheProfile& p, uint64_t middle_blocks) {
  if (middle_blocks == 0) return kv_bytes_per_token(p);
  // Each head's middle as its layout holds it: tier 1 at its width, tier 2 at the aged width
  // (aging), M_h blocks (heavy-hitter eviction), M otherwise.
  double total = 0;
  for (uint32_t l = 0; l < p.shape.layers; ++l)
    for (uint32_t h = 0; h < p.shape.kv_heads; ++h) {
      const KvHeadBits b = p.bits_of(l, h);
      const KvHeadLayout layout = kv_head_layout(p, b, middle_blocks);
      total += static_cast<double>(layout.tier1_blocks * kv_head_block_bytes(p, b) +
                                   layout.tier2_blocks * kv_head_block_bytes(p, p.aged_bits_of(b)));
    }
  return total / (static_cast<double>(middle_blocks) * p.block_tokens);
}

double kv_average_bits(const KvCacheProfile& p) {
  const double elements = 2.0 * p.shape.layers * p.shape.kv_heads * p.shape.head_dim;
  return kv_bytes_per_token(p) * 8.0 / elements;
}

}  // namespace tern
