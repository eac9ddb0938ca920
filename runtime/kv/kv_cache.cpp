#include "runtime/kv/kv_cache.h"

#include <algorithm>

namespace tern {

const char* to_string(KvType type) {
  switch (type) {
    case KvType::F16: return "f16";
    case KvType::F32: return "f32";
  }
  return "unknown";
}

void KvCache::attend(uint32_t layer, const KvAttention& a, const ThreadPool* pool) const {
  // Short attention is cheaper than waking the workers (each head computes the same either
  // way, so the threshold never changes results); an observer's callbacks run serially.
  const size_t attended = std::min<size_t>(static_cast<size_t>(a.pos0) + a.n, capacity_);
  const size_t macs = static_cast<size_t>(a.n) * attended * a.heads * shape_.head_dim * 2;
  auto one_head = [&](size_t h) { attend_head(layer, static_cast<uint32_t>(h), a); };
  if (pool != nullptr && macs >= (size_t{1} << 20) && a.observer == nullptr) {
    pool->parallel_for(shape_.kv_heads, one_head);
  } else {
    for (uint32_t h = 0; h < shape_.kv_heads; ++h) attend_head(layer, h, a);
  }
}

}  // namespace tern
