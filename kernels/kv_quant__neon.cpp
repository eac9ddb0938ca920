// NEON KV quantization loops (aarch64 baseline Advanced SIMD).
#include <arm_neon.h>

#include <cmath>

#include "kernels/kv_ukernels.h"

namespace tern {
namespace {

void key_block_minmax(const float* keys, uint32_t tokens, uint32_t head_dim, float* lo, float* hi) {
  uint32_t c = 0;
  for (; c + 4 <= head_dim; c += 4) {
    float32x4_t l = vld1q_f32(keys + c), h = l;
    for (uint32_t t = 1; t < tokens; ++t) {
      const float32x4_t x = vld1q_f32(keys + static_cast<size_t>(t) * head_dim + c);
      l = vminq_f32(x, l);
      h = vmaxq_f32(x, h);
    }
    vst1q_f32(lo + c, l);
    vst1q_f32(hi + c, h);
  }
  for (; c < head_dim; ++c) {
    float l = keys[c], h = keys[c];
    for (uint32_t t = 1; t < tokens; ++t) {
      const float x = keys[static_cast<size_t>(t) * head_dim + c];
      l = x < l ? x : l;
      h = x > h ? x : h;
    }
    lo[c] = l;
    hi[c] = h;
  }
}

void range(const float* x, uint32_t n, float* lo, float* hi) {
  float l = x[0], h = x[0];
  uint32_t i = 0;
  if (n >= 4) {
    float32x4_t vl = vld1q_f32(x), vh = vl;
    for (i = 4; i + 4 <= n; i += 4) {
      const float32x4_t v = vld1q_f32(x + i);
      vl = vminq_f32(v, vl);
      vh = vmaxq_f32(v, vh);
    }
    l = vminvq_f32(vl);
    h = vmaxvq_f32(vh);
  }
  for (; i < n; ++i) {
    l = x[i] < l ? x[i] : l;
    h = x[i] > h ? x[i] : h;
  }
  *lo = l;
  *hi = h;
}

void codes(const float* x, const float* min, const float* inv, uint32_t n, uint32_t levels, uint8_t* out) {
  const float top = static_cast<float>(levels);
  const float32x4_t zero = vdupq_n_f32(0.0f), vtop = vdupq_n_f32(top);
  uint32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint16x4_t half[2];
    for (int k = 0; k < 2; ++k) {
      const uint32_t j = i + 4 * k;
      float32x4_t r = vmulq_f32(vsubq_f32(vld1q_f32(x + j), vld1q_f32(min + j)), vld1q_f32(inv + j));
      r = vrndnq_f32(r);  // round half to even
      r = vminq_f32(vmaxq_f32(r, zero), vtop);
      half[k] = vmovn_u32(vcvtq_u32_f32(r));
    }
    vst1_u8(out + i, vmovn_u16(vcombine_u16(half[0], half[1])));
  }
  for (; i < n; ++i) {
    float r = std::nearbyint((x[i] - min[i]) * inv[i]);
    r = r < 0.0f ? 0.0f : (r > top ? top : r);
    out[i] = static_cast<uint8_t>(r);
  }
}

}  // namespace

const KvQuantUkernels kv_quant__neon = {key_block_minmax, range, codes};

}  // namespace tern
