// Rotary position embedding on one head's rows: the angles of a position, and the two pair
// layouts (rotate-half as in LLaMA/HF, adjacent pairs as in GGUF's original order). Shared
// by the forward pass and the KV cache, which rotates queries back by the positions it
// evicted (runtime/kv/kv_policy.h).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace tern {

inline void rope_angles(const float* inv_freq, size_t half, uint32_t pos, float* cos, float* sin) {
  for (size_t i = 0; i < half; ++i) {
    const float angle = static_cast<float>(pos) * inv_freq[i];
    cos[i] = std::cos(angle);
    sin[i] = std::sin(angle);
  }
}

inline void rope_rotate_half(float* head, size_t head_dim, const float* cos, const float* sin) {
  const size_t half = head_dim / 2;
  for (size_t i = 0; i < half; ++i) {
    const float a = head[i], b = head[i + half];
    head[i] = a * cos[i] - b * sin[i];
    head[i + half] = b * cos[i] + a * sin[i];
  }
}

inline void rope_adjacent_pairs(float* head, size_t head_dim, const float* cos, const float* sin) {
  for (size_t i = 0; i < head_dim / 2; ++i) {
    const float a = head[2 * i], b = head[2 * i + 1];
    head[2 * i] = a * cos[i] - b * sin[i];
    head[2 * i + 1] = a * sin[i] + b * cos[i];
  }
}

// A model's RoPE, for code that rotates rows by positions of its own choosing.
struct Rope {
  const float* inv_freq = nullptr;  // head_dim / 2 frequencies
  bool adjacent_pairs = false;
  // Rotates `count` rows of head_dim floats by -back positions (R(p - back) = R(-back) R(p)).
  // cos and sin hold head_dim / 2 floats each (scratch). Out of line (rope.cpp), so the
  // forward pass and the KV cache round alike wherever a compiler would fuse differently.
  void rotate_back(float* rows, uint32_t count, uint32_t head_dim, uint32_t back, float* cos, float* sin) const;
};

}  // namespace tern
