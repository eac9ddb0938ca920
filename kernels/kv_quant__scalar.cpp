// Portable reference for the KV quantization inner loops.
#include "kernels/kv_ukernels.h"

namespace tern {
namespace {

void key_block_minmax(const float* keys, uint32_t tokens, uint32_t head_dim, float* lo, float* hi) {
  for (uint32_t c = 0; c < head_dim; ++c) lo[c] = hi[c] = keys[c];
  for (uint32_t t = 1; t < tokens; ++t) {
    const float* row = keys + static_cast<size_t>(t) * head_dim;
    for (uint32_t c = 0; c < head_dim; ++c) kv_widen_range(row[c], lo + c, hi + c);
  }
}

void range(const float* x, uint32_t n, float* lo, float* hi) {
  float a = x[0], b = x[0];
  for (uint32_t i = 1; i < n; ++i) kv_widen_range(x[i], &a, &b);
  *lo = a;
  *hi = b;
}

void codes(const float* x, const float* min, const float* inv, uint32_t n, uint32_t levels, uint8_t* out) {
  const float top = static_cast<float>(levels);
  for (uint32_t i = 0; i < n; ++i) out[i] = kv_code(x[i], min[i], inv[i], top);
}

void float_halves(const float* x, uint32_t n, uint16_t* out) {
  for (uint32_t i = 0; i < n; ++i) out[i] = f32_to_f16(x[i]);
}

}  // namespace

const KvQuantUkernels kv_quant__scalar = {key_block_minmax, range, codes, float_halves};

}  // namespace tern
