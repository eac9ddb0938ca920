// IEEE half and bfloat16 conversions for every kernel: scalar ones (exact both ways, the
// float-to-half one rounding to nearest even), and the vector loads that widen halves as
// they load, defined only in the files whose ISA flags provide them (F16C, AVX-512F, NEON).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#endif

namespace tern {

// A float's IEEE bits and back.
inline uint32_t float_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
inline float float_from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Exact: every half is a float. Branch-free on normal values, which is all a KV cache holds
// in practice; subnormals renormalize through one float subtraction.
inline float f16_to_f32(uint16_t h) {
  const uint32_t magic_bits = 113u << 23;  // 2^-14 as float bits
  uint32_t o = static_cast<uint32_t>(h & 0x7fffu) << 13;
  const uint32_t exp = o & 0x0f800000u;
  o += (127u - 15u) << 23;
  if (exp == 0x0f800000u) {
    o += (128u - 16u) << 23;  // inf / NaN (payload kept)
  } else if (exp == 0) {
    o += 1u << 23;
    o = float_bits(float_from_bits(o) - float_from_bits(magic_bits));
  }
  o |= static_cast<uint32_t>(h & 0x8000u) << 16;
  return float_from_bits(o);
}

// Round to nearest even; overflow to infinity; a NaN stays NaN, quiet, with the top 9 bits
// of its payload (as F16C's VCVTPS2PH and AArch64's FCVT convert, so the SIMD rows of
// kv_quant's float_halves equal this bit for bit).
inline uint16_t f32_to_f16(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x1ffu));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // infinity, or rounds to it
  if (abs < 0x38800000u) {                                               // below the smallest normal half: a subnormal
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // value / 2^-24 = m * 2^(e - 126)
    uint32_t half = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (abs - 0x38000000u) >> 13;
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

inline float bf16_to_f32(uint16_t h) { return float_from_bits(static_cast<uint32_t>(h) << 16); }

// Round to nearest even; NaN stays a quiet NaN.
inline uint16_t f32_to_bf16(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

#if defined(__F16C__)
inline __m256 load_f16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
#endif
#if defined(__AVX512F__)
inline __m512 load_f16x16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
inline float32x4_t load_f16x4(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
#endif

}  // namespace tern
