// A KvCache that stores each (layer, kv head) at its own precision (runtime/kv/kv_policy.h
// has the token layout, byte math and eviction policy), and attends over it directly
// with the mixed-precision kernels (kernels/kv_attention.h).
//
// Quantized heads with rotation on keep everything (sinks and window included) in the
// Hadamard-rotated basis; attend() rotates the query in and the output back, read_*()
// rotate rows back, so callers always see the original basis.
//
// Threads: write() is not thread-safe (it shares one flush buffer); attend() and read_*()
// on different heads may run concurrently once writes for the step are done.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kv_attention.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/kv/kv_policy.h"

namespace tern {

class CompressedKvCache final : public KvCache {
 public:
  using KvCache::attend;
  // Builds a cache holding at least `tokens` positions without eviction, entirely in
  // `arena` (object, tables, storage); it uses at most kv_bytes_for_tokens(profile, tokens).
  static Result<CompressedKvCache*> create(const KvCacheProfile& profile, uint64_t tokens, ArenaAllocator& arena);

  // Appends `pos` (must be the head's next position). Past the capacity it evicts by
  // the profile's policy, or fails with ContextFull when eviction is off.
  Error write(uint32_t layer, uint32_t kv_head, uint32_t pos, const float* key, const float* value) override;
  bool evicting() const override { return profile_.eviction != KvEviction::None; }
  // The query heads of a GQA group read each block together, up to kKvMaxQueries at a time.
  size_t attention_scores_per_head(uint32_t group) const override {
    return static_cast<size_t>(group < kKvMaxQueries ? group : kKvMaxQueries) * resident_capacity_;
  }
  // Heavy-hitter eviction: 0, heads drop different positions and attend() re-positions.
  uint32_t evicted_positions(uint32_t layer) const override { return heavy_hitter() ? 0 : evicted_positions(layer, 0); }
  // Rows of positions [begin, begin + count) in the original basis; evicted positions read as zeros.
  void read_keys(uint32_t layer, uint32_t kv_head, uint32_t begin, uint32_t count, float* out) const override;
  void read_values(uint32_t layer, uint32_t kv_head, uint32_t begin, uint32_t count, float* out) const override;

  // Attention of `query_heads` query rows (head_dim floats each, stride head_dim) over the
  // head's kept positions < end_pos; out gets query_heads rows. `scores` holds at least
  // min(query_heads, 4) * resident_capacity() floats (the query heads of a GQA group read
  // each block together).
  void attend(uint32_t layer, uint32_t kv_head, const float* q, uint32_t query_heads, uint32_t end_pos, float scale,
              float* scores, float* out) const {
    attend(layer, kv_head, q, nullptr, query_heads, end_pos, scale, scores, out);
  }
  // The same, with `q_sinks` (query_heads rows, or null = q) scoring the S sink tokens:
  // after eviction the forward pass passes the query rotated at its position within the
  // cache (pos - evicted_positions()) there, as StreamingLLM does (runtime/kv/kv_policy.h).
  // Heavy-hitter eviction: q_sinks is unused; with `rope`, every kept segment is scored with
  // the query rotated back by the positions the head evicted after it (the kept positions
  // renumbered without gaps), and the head's middle blocks gather the attention they get.
  void attend(uint32_t layer, uint32_t kv_head, const float* q, const float* q_sinks, uint32_t query_heads,
              uint32_t end_pos, float scale, float* scores, float* out, const Rope* rope = nullptr) const;

  // Non-sink positions of the head dropped so far. StreamingLLM: its kept positions are the
  // sinks, then [sink_tokens + evicted_positions(), next_position()); heavy-hitter eviction:
  // resident_positions() lists them.
  uint32_t evicted_positions(uint32_t layer, uint32_t kv_head) const;
  // Forgets the positions >= `pos` written by an unfinished forward pass (an abort or
  // error mid-batch) so the session can continue at `pos`. InvalidState when some of them
  // already left the exact window (then only reset() recovers).
  Error rollback_to(uint32_t pos) override;
  bool rollback_is_exact(uint32_t pos) const override;
  uint32_t exact_append_room() const override;
  void reset() override;
  // Per head: its counters, the sink rows, the exact window ring and the middle blocks in
  // use (tier 2's, then tier 1's, oldest first; they load into slots 0.. of a cache with the
  // same profile).
  size_t state_bytes(uint32_t position) const override;
  void save_state(uint32_t position, uint8_t* out) const override;
  Error load_state(uint32_t position, const uint8_t* in, size_t size) override;
  const CompressedKvCache* compressed() const override { return this; }

  // Positions the head currently keeps, ascending; returns the count (<= resident_capacity()).
  uint32_t resident_positions(uint32_t layer, uint32_t kv_head, uint32_t* out) const;
  // The most positions one head holds (heavy-hitter eviction: heads' middles differ).
  uint32_t resident_capacity() const { return resident_capacity_; }
  bool heavy_hitter() const { return profile_.eviction == KvEviction::HeavyHitter; }
  // The next position each head expects (the number of positions written so far).
  uint32_t next_position(uint32_t layer, uint32_t kv_head) const;
  uint64_t evicted_blocks() const { return evicted_blocks_; }
  const KvCacheProfile& profile() const { return profile_; }
  void set_isa(Isa isa) { isa_ = isa; }

  struct HeadState;  // per (layer, kv head) storage and counters

 protected:
  void attend_head(uint32_t layer, uint32_t kv_head, const KvAttention& a) const override;

 private:
  CompressedKvCache(const KvCacheProfile& profile, uint32_t capacity, uint32_t middle_blocks);
  // fn(segment, first position, aged, middle slot or kNoSlot), in position order.
  template <typename Fn>
  void for_each_segment(const HeadState& h, uint32_t end_pos, Fn&& fn) const;
  static constexpr uint32_t kNoSlot = UINT32_MAX;
  void read_rows(uint32_t layer, uint32_t kv_head, uint32_t begin, uint32_t count, bool keys, float* out) const;
  Error flush_block(HeadState& h);
  Error age_block(HeadState& h);
  uint32_t least_attended(const HeadState& h) const;
  Error load_block_map(HeadState& h, const uint8_t*& in, const uint8_t* end);

  KvCacheProfile profile_;
  KvQuantLayout layout_;
  Isa isa_;
  uint32_t middle_blocks_;  // tier 1's ring (all middle blocks without aging)
  uint32_t aged_blocks_;    // tier 2's ring (aging)
  uint32_t resident_capacity_;
  HeadState* heads_ = nullptr;
  float* flush_ = nullptr;  // G x head_dim keys, then values (also the re-quantization scratch)
  uint64_t evicted_blocks_ = 0;
  bool aging_requantize_ = false;  // TERN_KV_AGING_REQUANTIZE=1: age by re-quantizing, not truncating
};

}  // namespace tern
