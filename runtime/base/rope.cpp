#include "runtime/base/rope.h"

namespace tern {

void Rope::rotate_back(float* rows, uint32_t count, uint32_t head_dim, uint32_t back, float* cos, float* sin) const {
  const size_t half = head_dim / 2;
  rope_angles(inv_freq, half, back, cos, sin);
  for (size_t i = 0; i < half; ++i) sin[i] = -sin[i];
  for (uint32_t r = 0; r < count; ++r) {
    float* row = rows + static_cast<size_t>(r) * head_dim;
    adjacent_pairs ? rope_adjacent_pairs(row, head_dim, cos, sin) : rope_rotate_half(row, head_dim, cos, sin);
  }
}

}  // namespace tern
