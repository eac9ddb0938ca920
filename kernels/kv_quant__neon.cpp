// NEON KV quantization loops (aarch64 baseline Advanced SIMD).
#include "kernels/f32_vec_neon.h"
#include "kernels/kv_quant_impl.h"

namespace tern {
namespace {

struct Neon : F32x4 {
  static constexpr uint32_t kCodeStep = 8;
  // Eight codes: two vectors narrowed into one 8-byte store.
  static void codes(const float* x, const float* min, const float* inv, float top, uint8_t* out) {
    const float32x4_t zero = vdupq_n_f32(0.0f), vtop = vdupq_n_f32(top);
    uint16x4_t half[2];
    for (int k = 0; k < 2; ++k) {
      float32x4_t r = vmulq_f32(vsubq_f32(vld1q_f32(x + 4 * k), vld1q_f32(min + 4 * k)), vld1q_f32(inv + 4 * k));
      r = vrndnq_f32(r);  // round half to even
      r = vminq_f32(vmaxq_f32(r, zero), vtop);
      half[k] = vmovn_u32(vcvtq_u32_f32(r));
    }
    vst1_u8(out, vmovn_u16(vcombine_u16(half[0], half[1])));
  }
  // FCVTN rounds as FPCR says: to nearest even unless an app changed it.
  static constexpr uint32_t kHalfStep = 4;
  static void halves(const float* x, uint16_t* out) { vst1_u16(out, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x)))); }
};

}  // namespace

const KvQuantUkernels kv_quant__neon = kv_quant_impl::ukernels<Neon>();

}  // namespace tern
