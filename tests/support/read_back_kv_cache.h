// A test decorator over any KvCache: attention reads every kept row back as floats
// (read_keys / read_values), scores them with a plain scalar loop and weighs the value rows
// with the dense f32 kernel, so a cache's own in-place attention can be checked against what
// it stores, on the same cache state. Writes, rollback and eviction go to the wrapped cache.
// Not for eviction (rows are read by position).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/dense_attention.h"
#include "kernels/kv_attention.h"
#include "runtime/kv/kv_cache.h"

namespace tern::testing {

class ReadBackKvCache final : public KvCache {
 public:
  explicit ReadBackKvCache(KvCache& inner)
      : KvCache(inner.shape(), inner.capacity_tokens()),
        inner_(inner),
        rows_(static_cast<size_t>(inner.shape().kv_heads) * 2 * inner.capacity_tokens() * inner.shape().head_dim) {}

  bool evicting() const override { return inner_.evicting(); }
  Error write(uint32_t layer, uint32_t kv_head, uint32_t pos, const float* key, const float* value) override {
    return inner_.write(layer, kv_head, pos, key, value);
  }
  size_t attention_scores_per_head(uint32_t group) const override { return static_cast<size_t>(group) * capacity_; }
  uint32_t evicted_positions(uint32_t layer) const override { return inner_.evicted_positions(layer); }
  Error rollback_to(uint32_t pos) override { return inner_.rollback_to(pos); }
  bool rollback_is_exact(uint32_t pos) const override { return inner_.rollback_is_exact(pos); }
  uint32_t exact_append_room() const override { return inner_.exact_append_room(); }
  size_t state_bytes(uint32_t position) const override { return inner_.state_bytes(position); }
  void save_state(uint32_t position, uint8_t* out) const override { inner_.save_state(position, out); }
  Error load_state(uint32_t position, const uint8_t* in, size_t size) override {
    return inner_.load_state(position, in, size);
  }
  void reset() override { inner_.reset(); }
  void read_keys(uint32_t layer, uint32_t kv_head, uint32_t begin, uint32_t count, float* out) const override {
    inner_.read_keys(layer, kv_head, begin, count, out);
  }
  void read_values(uint32_t layer, uint32_t kv_head, uint32_t begin, uint32_t count, float* out) const override {
    inner_.read_values(layer, kv_head, begin, count, out);
  }

 protected:
  void attend_head(uint32_t layer, uint32_t kv_head, const KvAttention& a) const override {
    const uint32_t hd = shape_.head_dim, group = a.heads / shape_.kv_heads;
    const size_t qd = static_cast<size_t>(a.heads) * hd;
    float* keys = rows_.data() + static_cast<size_t>(kv_head) * 2 * capacity_ * hd;
    float* values = keys + static_cast<size_t>(capacity_) * hd;
    const uint32_t total = a.pos0 + a.n;
    inner_.read_keys(layer, kv_head, 0, total, keys);
    inner_.read_values(layer, kv_head, 0, total, values);
    float* sc = a.scores + static_cast<size_t>(kv_head) * a.scores_per_head;
    for (uint32_t t = 0; t < a.n; ++t) {
      const uint32_t len = a.pos0 + t + 1;
      for (uint32_t g = 0; g < group; ++g) {
        const size_t row = t * qd + (static_cast<size_t>(kv_head) * group + g) * hd;
        const float* q = a.q + row;
        float* p = sc + static_cast<size_t>(g) * capacity_;
        for (uint32_t j = 0; j < len; ++j) {
          float dot = 0.0f;
          for (uint32_t i = 0; i < hd; ++i) dot += q[i] * keys[static_cast<size_t>(j) * hd + i];
          p[j] = dot * a.scale;
        }
        kv_softmax(p, len);
      }
      const size_t first = t * qd + static_cast<size_t>(kv_head) * group * hd;
      dense_attention_values(active_isa_level(), sc, capacity_, group, values, hd, len, a.out + first);
    }
  }

 private:
  KvCache& inner_;
  mutable std::vector<float> rows_;  // [kv_head][keys, values][capacity][head_dim]
};

}  // namespace tern::testing
