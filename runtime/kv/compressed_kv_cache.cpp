#include "runtime/kv/compressed_kv_cache.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "kernels/dense_matmul.h"
#include "kernels/kv_quant.h"

namespace tern {

struct CompressedKvCache::HeadState {
  uint8_t* base = nullptr;
  KvHeadLayout layout;
  KvHeadBits bits;
  bool rotated = false;
  uint32_t next_pos = 0;
  uint32_t window_start = 0;  // ring index of the oldest window token
  uint32_t window_count = 0;
  uint32_t middle_start = 0;  // ring index of the oldest tier-1 block
  uint32_t middle_count = 0;
  KvHeadBits aged;          // tier 2's widths
  uint32_t aged_start = 0;  // ring index of the oldest tier-2 block
  uint32_t aged_count = 0;
  // Heavy-hitter eviction (in the head's storage at layout.block_map): per middle slot its
  // first position, the attention it got and `queries` when it entered; `order` lists the
  // middle_count slots in use by position. Attention updates them (attend() is const for
  // the caller; each head is updated by the one thread that attends it).
  uint32_t* block_first = nullptr;
  float* block_score = nullptr;
  uint32_t* block_since = nullptr;
  uint32_t* order = nullptr;
  mutable uint32_t queries = 0;       // query rows that attended the head so far
  mutable uint32_t scored_until = 0;  // one past the latest query position attended
};

size_t kv_compressed_object_bytes() { return sizeof(CompressedKvCache); }
size_t kv_compressed_head_state_bytes() { return sizeof(CompressedKvCache::HeadState); }

namespace {

constexpr size_t kAlign = 64;

size_t exact_bytes(KvType type) { return type == KvType::F16 ? 2 : 4; }

void store_exact(KvType type, const float* x, uint32_t n, uint8_t* dst) {
  if (type == KvType::F32) {
    std::memcpy(dst, x, n * sizeof(float));
    return;
  }
  kv_float_halves(active_isa_level(), x, n, reinterpret_cast<uint16_t*>(dst));
}

void load_exact(KvType type, const uint8_t* src, uint32_t n, float* out) {
  if (type == KvType::F32) {
    std::memcpy(out, src, n * sizeof(float));
    return;
  }
  const uint16_t* h = reinterpret_cast<const uint16_t*>(src);
  for (uint32_t i = 0; i < n; ++i) out[i] = f16_to_f32(h[i]);
}

}  // namespace

CompressedKvCache::CompressedKvCache(const KvCacheProfile& profile, uint32_t capacity, uint32_t middle_blocks)
    : KvCache(profile.shape, capacity),
      profile_(profile),
      isa_(active_isa_level()),
      middle_blocks_(static_cast<uint32_t>(profile.tier1_blocks(middle_blocks))),
      aged_blocks_(middle_blocks - static_cast<uint32_t>(profile.tier1_blocks(middle_blocks))),
      resident_capacity_(capacity) {
  layout_.block_tokens = profile.block_tokens;
  layout_.value_group = profile.value_group;
}

Result<CompressedKvCache*> CompressedKvCache::create(const KvCacheProfile& profile, uint64_t tokens,
                                                     ArenaAllocator& arena) {
  TERN_RETURN_IF_ERROR(kv_profile_validate(profile));
  const uint64_t blocks = kv_blocks_for_tokens(profile, tokens);
  const uint64_t capacity = kv_tokens_for_blocks(profile, blocks);
  TERN_CHECK_OR_RETURN(capacity <= UINT32_MAX, Error::OutOfRange, "KV cache of %llu positions",
                       static_cast<unsigned long long>(capacity));
  const KvShape& s = profile.shape;
  const size_t heads = static_cast<size_t>(s.layers) * s.kv_heads;
  TERN_ASSIGN_OR_RETURN(void* object,
                        arena.allocate(align_up(sizeof(CompressedKvCache), kAlign), kAlign, ArenaPurpose::KvCache));
  TERN_ASSIGN_OR_RETURN(void* states,
                        arena.allocate(align_up(heads * sizeof(HeadState), kAlign), kAlign, ArenaPurpose::KvCache));
  TERN_ASSIGN_OR_RETURN(void* bits,
                        arena.allocate(align_up(heads * sizeof(KvHeadBits), kAlign), kAlign, ArenaPurpose::KvCache));
  TERN_ASSIGN_OR_RETURN(
      void* flush, arena.allocate(align_up(static_cast<size_t>(profile.block_tokens) * s.head_dim * 8, kAlign), kAlign,
                                  ArenaPurpose::KvCache));
  auto* cache = new (object) CompressedKvCache(profile, static_cast<uint32_t>(capacity), static_cast<uint32_t>(blocks));
  cache->heads_ = static_cast<HeadState*>(states);
  const char* requantize = std::getenv("TERN_KV_AGING_REQUANTIZE");
  cache->aging_requantize_ = requantize != nullptr && requantize[0] == '1';
  cache->flush_ = static_cast<float*>(flush);
  KvHeadBits* table = static_cast<KvHeadBits*>(bits);
  for (uint32_t l = 0; l < s.layers; ++l) {
    for (uint32_t h = 0; h < s.kv_heads; ++h) {
      const size_t i = static_cast<size_t>(l) * s.kv_heads + h;
      table[i] = profile.bits_of(l, h);
      HeadState* st = new (&cache->heads_[i]) HeadState();
      st->bits = table[i];
      st->aged = profile.aged_bits_of(table[i]);
      st->rotated = profile.rotate && !table[i].exact() && kv_rotation_supported(s.head_dim);
      st->layout = kv_head_layout(profile, table[i], blocks);
      TERN_ASSIGN_OR_RETURN(void* base, arena.allocate(st->layout.total, kAlign, ArenaPurpose::KvCache));
      st->base = static_cast<uint8_t*>(base);
      if (profile.eviction == KvEviction::HeavyHitter) {
        const size_t m = st->layout.tier1_blocks;
        st->block_first = reinterpret_cast<uint32_t*>(st->base + st->layout.block_map);
        st->block_score = reinterpret_cast<float*>(st->block_first + m);
        st->block_since = reinterpret_cast<uint32_t*>(st->block_score + m);
        st->order = st->block_since + m;
      }
    }
  }
  cache->profile_.head_bits = table;
  cache->resident_capacity_ = static_cast<uint32_t>(kv_resident_tokens(profile, tokens));
  return cache;
}

uint32_t CompressedKvCache::next_position(uint32_t layer, uint32_t kv_head) const {
  return heads_[static_cast<size_t>(layer) * shape_.kv_heads + kv_head].next_pos;
}

// Moves tier 1's oldest block into tier 2 at the aged widths, dropping tier 2's oldest first
// when it is full (or failing, eviction off). The codes are truncated to their top bits
// (kv_truncate_*); TERN_KV_AGING_REQUANTIZE=1 re-quantizes the reconstruction instead, to
// measure the difference.
Error CompressedKvCache::age_block(HeadState& h) {
  const uint32_t D = shape_.head_dim, G = profile_.block_tokens;
  if (h.aged_count == aged_blocks_) {
    if (profile_.eviction == KvEviction::None) {
      return fail(Error::ContextFull, "KV cache full at %u positions (eviction off)", capacity_);
    }
    ++evicted_blocks_;
    h.aged_start = (h.aged_start + 1) % aged_blocks_;
    --h.aged_count;
  }
  const size_t from = h.middle_start, to = (h.aged_start + h.aged_count) % aged_blocks_;
  const uint8_t* keys = h.base + h.layout.middle_keys + from * h.layout.key_block_bytes;
  const uint8_t* values = h.base + h.layout.middle_values + from * h.layout.value_block_bytes;
  uint8_t* aged_keys = h.base + h.layout.aged_keys + to * h.layout.aged_key_block_bytes;
  uint8_t* aged_values = h.base + h.layout.aged_values + to * h.layout.aged_value_block_bytes;
  if (h.bits.key_bits == h.aged.key_bits) {
    std::memcpy(aged_keys, keys, h.layout.key_block_bytes);
  } else if (!aging_requantize_) {
    kv_truncate_key_block(keys, G, D, h.bits.key_bits, h.aged.key_bits, aged_keys);
  } else {
    kv_requantize_key_block(isa_, keys, G, D, h.bits.key_bits, h.aged.key_bits, flush_, aged_keys);
  }
  if (h.bits.value_bits == h.aged.value_bits) {
    std::memcpy(aged_values, values, h.layout.value_block_bytes);
  } else {
    const size_t row = kv_value_row_bytes(h.bits.value_bits, D, profile_.value_group);
    const size_t aged_row = kv_value_row_bytes(h.aged.value_bits, D, profile_.value_group);
    for (uint32_t t = 0; t < G; ++t) {
      if (!aging_requantize_) {
        kv_truncate_value_row(values + t * row, D, profile_.value_group, h.bits.value_bits, h.aged.value_bits,
                              aged_values + t * aged_row);
      } else {
        kv_requantize_value_row(isa_, values + t * row, D, profile_.value_group, h.bits.value_bits, h.aged.value_bits,
                                flush_, aged_values + t * aged_row);
      }
    }
  }
  ++h.aged_count;
  h.middle_start = (h.middle_start + 1) % middle_blocks_;
  --h.middle_count;
  return Error::Ok;
}

// Mean attention per query row since the block left the window; the order index of the
// least, among the blocks older than the head's protected recent share that some query has
// scored (none: the oldest). Ties: the older.
uint32_t CompressedKvCache::least_attended(const HeadState& h) const {
  uint32_t least = 0;
  double least_mean = 0;
  bool found = false;
  const uint32_t candidates = h.middle_count - h.middle_count * profile_.hh_recent_percent / 100;
  for (uint32_t i = 0; i < candidates; ++i) {
    const uint32_t slot = h.order[i], seen = h.queries - h.block_since[slot];
    if (seen == 0) continue;
    const double mean = static_cast<double>(h.block_score[slot]) / seen;
    if (!found || mean < least_mean) least = i, least_mean = mean, found = true;
  }
  return least;
}

Error CompressedKvCache::flush_block(HeadState& h) {
  const uint32_t D = shape_.head_dim, G = profile_.block_tokens, ring = profile_.recent_window + G;
  const size_t row = static_cast<size_t>(D) * exact_bytes(profile_.exact_type);
  const uint32_t slots = static_cast<uint32_t>(h.layout.tier1_blocks);
  size_t slot_index = 0;
  if (heavy_hitter()) {
    // Slots 0..middle_count-1 are in use (the middle only shrinks to refill at once).
    slot_index = h.middle_count;
    if (h.middle_count == slots) {
      ++evicted_blocks_;
      if (slots > 0) {
        const uint32_t i = least_attended(h);
        slot_index = h.order[i];
        std::memmove(h.order + i, h.order + i + 1, (slots - 1 - i) * sizeof(uint32_t));
        --h.middle_count;
      }
    }
    if (slots > 0) {
      h.block_first[slot_index] = h.next_pos - h.window_count;
      h.block_score[slot_index] = 0.0f;
      h.block_since[slot_index] = h.queries;
      h.order[h.middle_count] = static_cast<uint32_t>(slot_index);
    }
  } else {
    if (h.middle_count == middle_blocks_ && aged_blocks_ > 0) {
      TERN_RETURN_IF_ERROR(age_block(h));
    } else if (h.middle_count == middle_blocks_) {
      if (profile_.eviction == KvEviction::None) {
        return fail(Error::ContextFull, "KV cache full at %u positions (eviction off)", capacity_);
      }
      ++evicted_blocks_;
      if (middle_blocks_ > 0) {
        h.middle_start = (h.middle_start + 1) % middle_blocks_;
        --h.middle_count;
      }
    }
    if (middle_blocks_ > 0) slot_index = (h.middle_start + h.middle_count) % middle_blocks_;
  }
  if (slots > 0) {
    uint8_t* block = h.base + h.layout.middle_keys + slot_index * h.layout.key_block_bytes;
    uint8_t* values = h.base + h.layout.middle_values + slot_index * h.layout.value_block_bytes;
    for (uint32_t t = 0; t < G; ++t) {
      const size_t slot = (h.window_start + t) % ring;
      const uint8_t* k = h.base + h.layout.window_keys + slot * row;
      const uint8_t* v = h.base + h.layout.window_values + slot * row;
      if (h.bits.exact()) {
        std::memcpy(block + t * row, k, row);
        std::memcpy(values + t * row, v, row);
      } else {
        load_exact(profile_.exact_type, k, D, flush_ + static_cast<size_t>(t) * D);
        load_exact(profile_.exact_type, v, D, flush_ + static_cast<size_t>(G + t) * D);
      }
    }
    if (!h.bits.exact()) {
      kv_quantize_key_block(isa_, flush_, G, D, h.bits.key_bits, block);
      const size_t value_row = kv_value_row_bytes(h.bits.value_bits, D, profile_.value_group);
      for (uint32_t t = 0; t < G; ++t)
        kv_quantize_value_row(isa_, flush_ + static_cast<size_t>(G + t) * D, D, profile_.value_group, h.bits.value_bits,
                              values + t * value_row);
    }
    ++h.middle_count;
  }
  h.window_start = (h.window_start + G) % ring;
  h.window_count -= G;
  return Error::Ok;
}

Error CompressedKvCache::write(uint32_t layer, uint32_t kv_head, uint32_t pos, const float* key, const float* value) {
  HeadState& h = heads_[static_cast<size_t>(layer) * shape_.kv_heads + kv_head];
  if (pos != h.next_pos) {
    return fail(Error::InvalidArgument, "KV head %u.%u: write of position %u, expected %u", layer, kv_head, pos,
                h.next_pos);
  }
  const uint32_t D = shape_.head_dim, ring = profile_.recent_window + profile_.block_tokens;
  const size_t row = static_cast<size_t>(D) * exact_bytes(profile_.exact_type);
  float k[kKvMaxHeadDim], v[kKvMaxHeadDim];
  if (h.rotated) {
    std::memcpy(k, key, D * sizeof(float));
    std::memcpy(v, value, D * sizeof(float));
    kv_hadamard_rotate(k, D);
    kv_hadamard_rotate(v, D);
    key = k;
    value = v;
  }
  if (pos < profile_.sink_tokens) {
    store_exact(profile_.exact_type, key, D, h.base + h.layout.sink_keys + pos * row);
    store_exact(profile_.exact_type, value, D, h.base + h.layout.sink_values + pos * row);
  } else {
    if (h.window_count == ring) TERN_RETURN_IF_ERROR(flush_block(h));
    const size_t slot = (h.window_start + h.window_count) % ring;
    store_exact(profile_.exact_type, key, D, h.base + h.layout.window_keys + slot * row);
    store_exact(profile_.exact_type, value, D, h.base + h.layout.window_values + slot * row);
    ++h.window_count;
  }
  ++h.next_pos;
  return Error::Ok;
}

template <typename Fn>
void CompressedKvCache::for_each_segment(const HeadState& h, uint32_t end_pos, Fn&& fn) const {
  const uint32_t D = shape_.head_dim, G = profile_.block_tokens, ring = profile_.recent_window + G;
  const size_t row = static_cast<size_t>(D) * exact_bytes(profile_.exact_type);
  const KvSegmentKind exact = profile_.exact_type == KvType::F16 ? KvSegmentKind::ExactF16 : KvSegmentKind::ExactF32;
  const uint32_t limit = end_pos < h.next_pos ? end_pos : h.next_pos;
  const uint32_t sinks = limit < profile_.sink_tokens ? limit : profile_.sink_tokens;
  if (sinks > 0)
    fn(KvSegment{exact, sinks, h.base + h.layout.sink_keys, h.base + h.layout.sink_values}, 0u, false, kNoSlot);
  const uint32_t window_first = h.next_pos - h.window_count;
  const uint32_t middle_first = window_first - h.middle_count * G;
  const uint32_t aged_first = middle_first - h.aged_count * G;
  // The aged ring, then the middle ring: whole blocks of G positions, oldest first, each ring
  // read in slot order from its start. False once a block begins at or past `limit`.
  const auto ring_blocks = [&](uint32_t first_pos, uint32_t count, size_t start, size_t slots, size_t keys_at,
                               size_t values_at, size_t key_bytes, size_t value_bytes, bool exact_head, bool aged) {
    for (uint32_t i = 0; i < count; ++i) {
      const uint32_t first = first_pos + i * G;
      if (first >= limit) return false;
      const uint32_t n = limit - first < G ? limit - first : G;
      const size_t slot = (start + i) % slots;
      fn(KvSegment{exact_head ? exact : KvSegmentKind::Quantized, n, h.base + keys_at + slot * key_bytes,
                   h.base + values_at + slot * value_bytes},
         first, aged, kNoSlot);
    }
    return true;
  };
  if (heavy_hitter()) {
    // The head's own blocks, by position.
    for (uint32_t i = 0; i < h.middle_count; ++i) {
      const uint32_t slot = h.order[i], first = h.block_first[slot];
      if (first >= limit) return;
      const uint32_t n = limit - first < G ? limit - first : G;
      fn(KvSegment{h.bits.exact() ? exact : KvSegmentKind::Quantized, n,
                   h.base + h.layout.middle_keys + slot * h.layout.key_block_bytes,
                   h.base + h.layout.middle_values + slot * h.layout.value_block_bytes},
         first, false, slot);
    }
  } else if (!ring_blocks(aged_first, h.aged_count, h.aged_start, aged_blocks_, h.layout.aged_keys,
                          h.layout.aged_values, h.layout.aged_key_block_bytes, h.layout.aged_value_block_bytes,
                          h.aged.exact(), true) ||
             !ring_blocks(middle_first, h.middle_count, h.middle_start, middle_blocks_, h.layout.middle_keys,
                          h.layout.middle_values, h.layout.key_block_bytes, h.layout.value_block_bytes, h.bits.exact(),
                          false)) {
    return;
  }
  if (limit <= window_first) return;
  const uint32_t n = limit - window_first;
  const uint32_t first_part = n < ring - h.window_start ? n : ring - h.window_start;
  fn(KvSegment{exact, first_part, h.base + h.layout.window_keys + h.window_start * row,
               h.base + h.layout.window_values + h.window_start * row},
     window_first, false, kNoSlot);
  if (n > first_part) {
    fn(KvSegment{exact, n - first_part, h.base + h.layout.window_keys, h.base + h.layout.window_values},
       window_first + first_part, false, kNoSlot);
  }
}

uint32_t CompressedKvCache::evicted_positions(uint32_t layer, uint32_t kv_head) const {
  const HeadState& h = heads_[static_cast<size_t>(layer) * shape_.kv_heads + kv_head];
  if (h.next_pos <= profile_.sink_tokens) return 0;
  return h.next_pos - profile_.sink_tokens - ((h.middle_count + h.aged_count) * profile_.block_tokens + h.window_count);
}

void CompressedKvCache::reset() {
  const size_t heads = static_cast<size_t>(shape_.layers) * shape_.kv_heads;
  for (size_t i = 0; i < heads; ++i) {
    HeadState& h = heads_[i];
    h.next_pos = h.window_start = h.window_count = h.middle_start = h.middle_count = 0;
    h.aged_start = h.aged_count = 0;
    h.queries = h.scored_until = 0;
  }
  evicted_blocks_ = 0;
}

Error CompressedKvCache::rollback_to(uint32_t pos) {
  const size_t heads = static_cast<size_t>(shape_.layers) * shape_.kv_heads;
  // Check every head first, so a refusal changes nothing.
  for (size_t i = 0; i < heads; ++i) {
    const HeadState& h = heads_[i];
    if (h.next_pos <= pos) continue;
    // Sinks are indexed by position (rewritten in place); later positions must all still
    // be in the window.
    const uint32_t from = pos > profile_.sink_tokens ? pos : profile_.sink_tokens;
    TERN_CHECK_OR_RETURN(h.next_pos <= from || h.next_pos - from <= h.window_count, Error::InvalidState,
                         "KV cache: positions %u.. already left the exact window; reset the session", pos);
  }
  for (size_t i = 0; i < heads; ++i) {
    HeadState& h = heads_[i];
    if (h.next_pos <= pos) continue;
    const uint32_t from = pos > profile_.sink_tokens ? pos : profile_.sink_tokens;
    if (h.next_pos > from) h.window_count -= h.next_pos - from;
    h.next_pos = pos;
  }
  return Error::Ok;
}

uint32_t CompressedKvCache::exact_append_room() const {
  // Heavy-hitter eviction: every query attended adds to the blocks' attention, which a
  // roll-back cannot take back.
  if (heavy_hitter()) return 0;
  // Every head holds the same positions: the free sink slots and the ring's free slots (a
  // write into a full ring first flushes its oldest block).
  const HeadState& h = heads_[0];
  const uint32_t ring = profile_.recent_window + profile_.block_tokens;
  const uint32_t sinks_free = h.next_pos < profile_.sink_tokens ? profile_.sink_tokens - h.next_pos : 0;
  return sinks_free + (ring - h.window_count);
}

bool CompressedKvCache::rollback_is_exact(uint32_t pos) const {
  const uint32_t S = profile_.sink_tokens, G = profile_.block_tokens, ring = profile_.recent_window + G;
  // After the first S positions, a fresh cache keeps the last `window` of the R non-sink
  // positions exact and has flushed the rest in blocks of G, as each write found the ring full.
  const uint32_t rest = pos > S ? pos - S : 0;
  const uint32_t fresh_window = rest <= ring ? rest : rest - (rest - ring + G - 1) / G * G;
  const size_t heads = static_cast<size_t>(shape_.layers) * shape_.kv_heads;
  for (size_t i = 0; i < heads; ++i) {
    const HeadState& h = heads_[i];
    if (h.next_pos < pos) return false;
    if (heavy_hitter() && h.scored_until > pos) return false;  // those queries' attention stays
    const uint32_t from = pos > S ? pos : S;
    const uint32_t dropped = h.next_pos > from ? h.next_pos - from : 0;
    if (dropped > h.window_count || h.window_count - dropped != fresh_window) return false;
  }
  return true;
}

namespace {

// aged_count: tier-2 blocks (caches without aging write 0 there, as states before aging did).
struct HeadCounters {
  uint32_t next_pos, window_start, window_count, aged_count, middle_count;
};

}  // namespace

size_t CompressedKvCache::state_bytes(uint32_t) const {
  const size_t row = static_cast<size_t>(shape_.head_dim) * exact_bytes(profile_.exact_type);
  const size_t ring = profile_.recent_window + profile_.block_tokens;
  size_t bytes = sizeof(uint64_t);
  const size_t heads = static_cast<size_t>(shape_.layers) * shape_.kv_heads;
  for (size_t i = 0; i < heads; ++i) {
    const HeadState& h = heads_[i];
    const size_t sinks = h.next_pos < profile_.sink_tokens ? h.next_pos : profile_.sink_tokens;
    bytes += sizeof(HeadCounters) + 2 * (sinks + ring) * row +
             static_cast<size_t>(h.middle_count) * (h.layout.key_block_bytes + h.layout.value_block_bytes) +
             static_cast<size_t>(h.aged_count) * (h.layout.aged_key_block_bytes + h.layout.aged_value_block_bytes);
    if (heavy_hitter()) bytes += (3 * static_cast<size_t>(h.middle_count) + 2) * sizeof(uint32_t);
  }
  return bytes;
}

void CompressedKvCache::save_state(uint32_t, uint8_t* out) const {
  const size_t row = static_cast<size_t>(shape_.head_dim) * exact_bytes(profile_.exact_type);
  const size_t ring = profile_.recent_window + profile_.block_tokens;
  auto put = [&](const void* src, size_t n) {
    std::memcpy(out, src, n);
    out += n;
  };
  put(&evicted_blocks_, sizeof(uint64_t));
  const size_t heads = static_cast<size_t>(shape_.layers) * shape_.kv_heads;
  for (size_t i = 0; i < heads; ++i) {
    const HeadState& h = heads_[i];
    const HeadCounters c{h.next_pos, h.window_start, h.window_count, h.aged_count, h.middle_count};
    put(&c, sizeof c);
    const size_t sinks = h.next_pos < profile_.sink_tokens ? h.next_pos : profile_.sink_tokens;
    put(h.base + h.layout.sink_keys, sinks * row);
    put(h.base + h.layout.sink_values, sinks * row);
    put(h.base + h.layout.window_keys, ring * row);
    put(h.base + h.layout.window_values, ring * row);
    // A ring's blocks oldest first (load_state puts them back from slot 0); heavy-hitter
    // middles by position, then each block's first position, attention and entry count.
    auto put_ring = [&](uint32_t count, size_t start, size_t slots, size_t at, size_t block_bytes) {
      for (uint32_t b = 0; b < count; ++b) {
        const size_t slot = heavy_hitter() ? h.order[b] : (start + b) % slots;
        put(h.base + at + slot * block_bytes, block_bytes);
      }
    };
    put_ring(h.aged_count, h.aged_start, aged_blocks_, h.layout.aged_keys, h.layout.aged_key_block_bytes);
    put_ring(h.aged_count, h.aged_start, aged_blocks_, h.layout.aged_values, h.layout.aged_value_block_bytes);
    put_ring(h.middle_count, h.middle_start, middle_blocks_, h.layout.middle_keys, h.layout.key_block_bytes);
    put_ring(h.middle_count, h.middle_start, middle_blocks_, h.layout.middle_values, h.layout.value_block_bytes);
    if (heavy_hitter()) {
      for (uint32_t b = 0; b < h.middle_count; ++b) {
        put(&h.block_first[h.order[b]], sizeof(uint32_t));
        put(&h.block_score[h.order[b]], sizeof(float));
        put(&h.block_since[h.order[b]], sizeof(uint32_t));
      }
      put(&h.queries, sizeof(uint32_t));
      put(&h.scored_until, sizeof(uint32_t));
    }
  }
}

// A heavy-hitter head's block map, saved by position, into slots 0..middle_count-1: the
// positions must ascend by whole blocks between the sinks and the window.
Error CompressedKvCache::load_block_map(HeadState& h, const uint8_t*& in, const uint8_t* end) {
  const uint32_t G = profile_.block_tokens, window_first = h.next_pos - h.window_count;
  const size_t need = (3 * static_cast<size_t>(h.middle_count) + 2) * sizeof(uint32_t);
  TERN_CHECK_OR_RETURN(static_cast<size_t>(end - in) >= need, Error::CorruptFile,
                       "compressed KV state is truncated in a block map");
  auto take32 = [&](void* dst) {
    std::memcpy(dst, in, sizeof(uint32_t));
    in += sizeof(uint32_t);
  };
  uint32_t next_free = profile_.sink_tokens;
  for (uint32_t b = 0; b < h.middle_count; ++b) {
    take32(&h.block_first[b]);
    take32(&h.block_score[b]);
    take32(&h.block_since[b]);
    h.order[b] = b;
    TERN_CHECK_OR_RETURN(h.block_first[b] >= next_free && h.block_first[b] + G <= window_first &&
                             (h.block_first[b] - profile_.sink_tokens) % G == 0,
                         Error::CorruptFile, "compressed KV state: a block at position %u does not fit",
                         h.block_first[b]);
    next_free = h.block_first[b] + G;
  }
  take32(&h.queries);
  take32(&h.scored_until);
  for (uint32_t b = 0; b < h.middle_count; ++b)
    TERN_CHECK_OR_RETURN(h.block_since[b] <= h.queries, Error::CorruptFile,
                         "compressed KV state: a block entered after the queries counted");
  return Error::Ok;
}

Error CompressedKvCache::load_state(uint32_t position, const uint8_t* in, size_t size) {
  reset();
  const uint8_t* end = in + size;
  const size_t row = static_cast<size_t>(shape_.head_dim) * exact_bytes(profile_.exact_type);
  const uint32_t ring = profile_.recent_window + profile_.block_tokens;
  auto take = [&](void* dst, size_t n) -> bool {
    if (static_cast<size_t>(end - in) < n) return false;
    std::memcpy(dst, in, n);
    in += n;
    return true;
  };
  Error e = Error::Ok;
  uint64_t evicted = 0;
  if (!take(&evicted, sizeof evicted)) e = fail(Error::CorruptFile, "compressed KV state is truncated");
  const size_t heads = static_cast<size_t>(shape_.layers) * shape_.kv_heads;
  for (size_t i = 0; i < heads && e == Error::Ok; ++i) {
    HeadState& h = heads_[i];
    HeadCounters c{};
    if (!take(&c, sizeof c)) {
      e = fail(Error::CorruptFile, "compressed KV state is truncated at head %zu", i);
      break;
    }
    const uint32_t sinks = c.next_pos < profile_.sink_tokens ? c.next_pos : profile_.sink_tokens;
    const uint64_t kept = static_cast<uint64_t>(sinks) +
                          (uint64_t{c.middle_count} + c.aged_count) * profile_.block_tokens + c.window_count;
    // Tier 2 only fills once tier 1 is full.
    if (c.next_pos != position || c.window_count > ring || c.window_start >= ring ||
        c.middle_count > h.layout.tier1_blocks || c.aged_count > aged_blocks_ ||
        (c.aged_count > 0 && c.middle_count != middle_blocks_) || kept > c.next_pos ||
        (profile_.eviction == KvEviction::None && kept != c.next_pos)) {
      e = fail(Error::CorruptFile,
               "compressed KV state: head %zu's counters (position %u, window %u at %u, %u blocks) "
               "do not fit this cache at position %u",
               i, c.next_pos, c.window_count, c.window_start, c.middle_count, position);
      break;
    }
    if (!take(h.base + h.layout.sink_keys, sinks * row) || !take(h.base + h.layout.sink_values, sinks * row) ||
        !take(h.base + h.layout.window_keys, ring * row) || !take(h.base + h.layout.window_values, ring * row)) {
      e = fail(Error::CorruptFile, "compressed KV state is truncated at head %zu", i);
      break;
    }
    // Each ring's blocks, oldest first, fill its slots from 0 (the starts are reset below).
    const bool ok = take(h.base + h.layout.aged_keys, size_t{c.aged_count} * h.layout.aged_key_block_bytes) &&
                    take(h.base + h.layout.aged_values, size_t{c.aged_count} * h.layout.aged_value_block_bytes) &&
                    take(h.base + h.layout.middle_keys, size_t{c.middle_count} * h.layout.key_block_bytes) &&
                    take(h.base + h.layout.middle_values, size_t{c.middle_count} * h.layout.value_block_bytes);
    if (!ok) {
      e = fail(Error::CorruptFile, "compressed KV state is truncated at head %zu", i);
      break;
    }
    h.next_pos = c.next_pos;
    h.window_start = c.window_start;
    h.window_count = c.window_count;
    h.middle_start = 0;
    h.middle_count = c.middle_count;
    h.aged_start = 0;
    h.aged_count = c.aged_count;
    if (heavy_hitter() && (e = load_block_map(h, in, end)) != Error::Ok) break;
  }
  if (e == Error::Ok && in != end)
    e = fail(Error::CorruptFile, "compressed KV state has %zu bytes too many", size_t(end - in));
  if (e != Error::Ok) {
    reset();
    return e;
  }
  evicted_blocks_ = evicted;
  return Error::Ok;
}

void CompressedKvCache::attend_head(uint32_t layer, uint32_t kv_head, const KvAttention& a) const {
  const uint32_t group = a.heads / shape_.kv_heads;
  const size_t qd = static_cast<size_t>(a.heads) * shape_.head_dim;
  float* scores = a.scores + static_cast<size_t>(kv_head) * a.scores_per_head;
  for (uint32_t t = 0; t < a.n; ++t) {
    const size_t first = t * qd + static_cast<size_t>(kv_head) * group * shape_.head_dim;
    attend(layer, kv_head, a.q + first, a.q_sinks != nullptr ? a.q_sinks + first : nullptr, group, a.pos0 + t + 1,
           a.scale, scores, a.out + first, a.rope);
  }
}

void CompressedKvCache::attend(uint32_t layer, uint32_t kv_head, const float* q, const float* q_sinks,
                               uint32_t query_heads, uint32_t end_pos, float scale, float* scores, float* out,
                               const Rope* rope) const {
  const HeadState& h = heads_[static_cast<size_t>(layer) * shape_.kv_heads + kv_head];
  const uint32_t D = shape_.head_dim, G = profile_.block_tokens;
  KvQuantLayout layout = layout_, aged_layout = layout_;
  layout.key_bits = h.bits.exact() ? 8 : h.bits.key_bits;
  layout.value_bits = h.bits.exact() ? 8 : h.bits.value_bits;
  aged_layout.key_bits = h.aged.exact() ? 8 : h.aged.key_bits;
  aged_layout.value_bits = h.aged.exact() ? 8 : h.aged.value_bits;
  const size_t stride = resident_capacity_;
  float qr[kKvMaxQueries * kKvMaxHeadDim];
  float qs[kKvMaxQueries * kKvMaxHeadDim];
  const bool hh = heavy_hitter();
  const bool split_sinks = !hh && q_sinks != nullptr && q_sinks != q && profile_.sink_tokens > 0;
  // Heavy-hitter eviction with re-positioning: a kept segment is scored with the query
  // rotated back by the positions the head evicted after it (sinks: all; the window: none).
  const bool shift = hh && rope != nullptr;
  const uint32_t window_first = h.next_pos - h.window_count;
  float cos[kKvMaxHeadDim / 2], sin[kKvMaxHeadDim / 2];
  // Query heads sharing this KV head go through each block together (up to 4 at a time).
  for (uint32_t q0 = 0; q0 < query_heads; q0 += kKvMaxQueries) {
    const uint32_t n = query_heads - q0 < kKvMaxQueries ? query_heads - q0 : kKvMaxQueries;
    const float* original = q + static_cast<size_t>(q0) * D;
    const float* query = original;
    const float* sink_query = split_sinks ? q_sinks + static_cast<size_t>(q0) * D : query;
    float* o = out + static_cast<size_t>(q0) * D;
    if (h.rotated) {
      std::memcpy(qr, query, static_cast<size_t>(n) * D * sizeof(float));
      for (uint32_t i = 0; i < n; ++i) kv_hadamard_rotate(qr + i * D, D);
      query = qr;
      if (split_sinks) {
        std::memcpy(qs, sink_query, static_cast<size_t>(n) * D * sizeof(float));
        for (uint32_t i = 0; i < n; ++i) kv_hadamard_rotate(qs + i * D, D);
        sink_query = qs;
      } else {
        sink_query = qr;
      }
    }
    // The query rotated back by `back` positions (and into the Hadamard basis), in qs;
    // consecutive segments with the same shift reuse it.
    uint32_t shifted_by = 0;
    const auto shifted_query = [&](uint32_t back) -> const float* {
      if (back == 0) return query;
      if (back != shifted_by) {
        std::memcpy(qs, original, static_cast<size_t>(n) * D * sizeof(float));
        rope->rotate_back(qs, n, D, back, cos, sin);
        if (h.rotated)
          for (uint32_t i = 0; i < n; ++i) kv_hadamard_rotate(qs + i * D, D);
        shifted_by = back;
      }
      return qs;
    };
    size_t total = 0;
    uint32_t blocks_seen = 0;
    for_each_segment(h, end_pos, [&](const KvSegment& seg, uint32_t first, bool aged, uint32_t slot) {
      const float* qq = query;
      if (shift && first < profile_.sink_tokens) {
        qq = shifted_query(evicted_positions(layer, kv_head));
      } else if (shift && slot != kNoSlot) {
        // Evicted after this block: the gap to the window less the kept blocks in it.
        qq = shifted_query(window_first - (first + G) - G * (h.middle_count - 1 - blocks_seen++));
      } else if (first < profile_.sink_tokens) {
        qq = sink_query;  // only the sink segment starts below sink_tokens
      }
      kv_segment_scores_multi(isa_, seg, aged ? aged_layout : layout, D, qq, n, scale, scores + total, stride);
      total += seg.tokens;
    });
    for (uint32_t i = 0; i < n; ++i) kv_softmax(scores + i * stride, total);
    std::memset(o, 0, static_cast<size_t>(n) * D * sizeof(float));
    total = 0;
    for_each_segment(h, end_pos, [&](const KvSegment& seg, uint32_t, bool aged, uint32_t slot) {
      kv_segment_accumulate_multi(isa_, seg, aged ? aged_layout : layout, D, scores + total, stride, n, o);
      if (hh && slot != kNoSlot) {
        // The attention the block got from these query rows, added in a fixed order.
        float sum = 0.0f;
        for (uint32_t i = 0; i < n; ++i)
          for (uint32_t t = 0; t < seg.tokens; ++t) sum += scores[i * stride + total + t];
        h.block_score[slot] += sum;
      }
      total += seg.tokens;
    });
    if (h.rotated)
      for (uint32_t i = 0; i < n; ++i) kv_hadamard_rotate(o + i * D, D);
    if (hh) h.queries += n;
  }
  if (hh && end_pos > h.scored_until) h.scored_until = end_pos;
}

uint32_t CompressedKvCache::resident_positions(uint32_t layer, uint32_t kv_head, uint32_t* out) const {
  const HeadState& h = heads_[static_cast<size_t>(layer) * shape_.kv_heads + kv_head];
  uint32_t n = 0;
  for_each_segment(h, UINT32_MAX, [&](const KvSegment& seg, uint32_t first, bool, uint32_t) {
    for (uint32_t t = 0; t < seg.tokens; ++t) out[n++] = first + t;
  });
  return n;
}

void CompressedKvCache::read_rows(uint32_t layer, uint32_t kv_head, uint32_t begin, uint32_t count, bool keys,
                                  float* out) const {
  const HeadState& h = heads_[static_cast<size_t>(layer) * shape_.kv_heads + kv_head];
  const uint32_t D = shape_.head_dim, G = profile_.block_tokens;
  std::memset(out, 0, static_cast<size_t>(count) * D * sizeof(float));
  const size_t row = static_cast<size_t>(D) * exact_bytes(profile_.exact_type);
  const uint32_t end = begin + count;
  for_each_segment(h, end, [&](const KvSegment& seg, uint32_t first, bool aged, uint32_t) {
    const KvHeadBits bits = aged ? h.aged : h.bits;
    for (uint32_t t = 0; t < seg.tokens; ++t) {
      const uint32_t pos = first + t;
      if (pos < begin) continue;
      float* dst = out + static_cast<size_t>(pos - begin) * D;
      const void* base = keys ? seg.keys : seg.values;
      if (seg.kind != KvSegmentKind::Quantized) {
        load_exact(profile_.exact_type, static_cast<const uint8_t*>(base) + t * row, D, dst);
      } else if (keys) {
        kv_dequantize_key_block(static_cast<const uint8_t*>(base), G, D, bits.key_bits, t, 1, dst);
      } else {
        kv_dequantize_value_row(
            static_cast<const uint8_t*>(base) + t * kv_value_row_bytes(bits.value_bits, D, profile_.value_group), D,
            profile_.value_group, bits.value_bits, dst);
      }
      if (h.rotated) kv_hadamard_rotate(dst, D);
    }
  });
}

void CompressedKvCache::read_keys(uint32_t layer, uint32_t kv_head, uint32_t begin, uint32_t count, float* out) const {
  read_rows(layer, kv_head, begin, count, true, out);
}

void CompressedKvCache::read_values(uint32_t layer, uint32_t kv_head, uint32_t begin, uint32_t count,
                                    float* out) const {
  read_rows(layer, kv_head, begin, count, false, out);
}

}  // namespace tern
