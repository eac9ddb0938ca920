// The KV kernels' tables, the shared (scalar) parts of KV quantization, and the drivers.
#include "kernels/kv_quant.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "kernels/dense_matmul.h"
#include "kernels/kv_ukernels.h"
#include "platform/cpu_features.h"

namespace tern {

namespace {

const IsaKernel<const KvQuantUkernels*> kKvQuantKernels[] = {
#if defined(__x86_64__)
    {Isa::Avx512, &kv_quant__avx512},
    {Isa::Avx2, &kv_quant__avx2},
#endif
#if defined(__aarch64__)
    {Isa::Neon, &kv_quant__neon},
#endif
    {Isa::Scalar, &kv_quant__scalar},
};

const IsaKernel<const KvAttentionUkernels*> kKvAttentionKernels[] = {
#if defined(__x86_64__)
    {Isa::Avx512, &kv_attention__avx512},
    {Isa::Avx2, &kv_attention__avx2},
#endif
#if defined(__aarch64__)
    {Isa::Neon, &kv_attention__neon},
#endif
    {Isa::Scalar, &kv_attention__scalar},
};

}  // namespace

Isa kv_quant_active_isa() {
  static const Isa isa = isa_select(kKvQuantKernels, active_isa_flags()).isa;
  return isa;
}

Isa kv_attention_active_isa() {
  static const Isa isa = isa_select(kKvAttentionKernels, active_isa_flags()).isa;
  return isa;
}

const KvQuantUkernels& kv_quant_ukernels(Isa isa) { return *isa_select(kKvQuantKernels, isa_level_flags(isa)).kernel; }

const KvAttentionUkernels& kv_attention_ukernels(Isa isa) {
  return *isa_select(kKvAttentionKernels, isa_level_flags(isa)).kernel;
}

Error kv_format_validate(uint32_t key_bits, uint32_t value_bits, uint32_t head_dim, uint32_t block_tokens,
                         uint32_t value_group) {
  TERN_CHECK_OR_RETURN(kv_bits_supported(key_bits) && kv_bits_supported(value_bits), Error::InvalidArgument,
                       "KV widths %u/%u bits: supported are 2, 3, 4, 8", key_bits, value_bits);
  TERN_CHECK_OR_RETURN(head_dim > 0 && head_dim <= kKvMaxHeadDim, Error::InvalidArgument,
                       "KV head_dim %u outside 1..%u", head_dim, kKvMaxHeadDim);
  TERN_CHECK_OR_RETURN(block_tokens > 0, Error::InvalidArgument, "KV key block of 0 tokens");
  TERN_CHECK_OR_RETURN(value_group > 0 && value_group % 8 == 0, Error::InvalidArgument,
                       "KV value group %u is not a positive multiple of 8", value_group);
  return Error::Ok;
}

void kv_pack_codes(const uint8_t* codes, size_t count, uint32_t bits, uint8_t* out) {
  std::memset(out, 0, kv_packed_bytes(bits, count));
  for (size_t i = 0; i < count; ++i) {
    const size_t bit = i * bits;
    const uint32_t shifted = static_cast<uint32_t>(codes[i]) << (bit & 7);
    out[bit >> 3] |= static_cast<uint8_t>(shifted);
    if ((bit & 7) + bits > 8) out[(bit >> 3) + 1] |= static_cast<uint8_t>(shifted >> 8);
  }
}

void kv_unpack_codes(const uint8_t* packed, size_t count, uint32_t bits, uint8_t* codes) {
  for (size_t i = 0; i < count; ++i)
    codes[i] = static_cast<uint8_t>(kv_code_at(packed, static_cast<uint32_t>(i), bits));
}

namespace {

constexpr float kF16Max = 65504.0f;

uint16_t f16_next_down(uint16_t h) {
  if (h == 0x0000u || h == 0x8000u) return 0x8001u;
  return (h & 0x8000u) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h - 1);
}
uint16_t f16_next_up(uint16_t h) {
  if (h == 0x0000u || h == 0x8000u) return 0x0001u;
  return (h & 0x8000u) ? static_cast<uint16_t>(h - 1) : static_cast<uint16_t>(h + 1);
}

inline void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

}  // namespace

void kv_quant_params(float lo, float hi, uint32_t bits, uint16_t* min_h, uint16_t* step_h, float* min_f,
                     float* step_f) {
  const float levels = static_cast<float>((1u << bits) - 1);
  lo = std::fmax(std::fmin(lo, kF16Max), -kF16Max);
  if (lo == 0.0f) lo = 0.0f;  // -0 and +0 must give the same stored minimum on every ISA
  hi = std::fmax(std::fmin(hi, kF16Max), lo);
  uint16_t mh = f32_to_f16(lo);
  if (f16_to_f32(mh) > lo) mh = f16_next_down(mh);
  const float mf = f16_to_f32(mh);
  uint16_t sh = f32_to_f16((hi - mf) / levels);
  // Outward: the top level must reach hi when reconstructed as the kernels do (min + code*step).
  while (mf + levels * f16_to_f32(sh) < hi && sh < 0x7bffu) sh = f16_next_up(sh);
  *min_h = mh;
  *step_h = sh;
  *min_f = mf;
  *step_f = f16_to_f32(sh);
}

void kv_quantize_key_block(Isa isa, const float* keys, uint32_t block_tokens, uint32_t head_dim, uint32_t bits,
                           uint8_t* block) {
  const KvQuantUkernels& uk = kv_quant_ukernels(isa);
  float lo[kKvMaxHeadDim], hi[kKvMaxHeadDim], mins[kKvMaxHeadDim], inv[kKvMaxHeadDim];
  uint8_t codes[kKvMaxHeadDim];
  uk.key_block_minmax(keys, block_tokens, head_dim, lo, hi);
  for (uint32_t c = 0; c < head_dim; ++c) {
    uint16_t mh, sh;
    float step;
    kv_quant_params(lo[c], hi[c], bits, &mh, &sh, &mins[c], &step);
    inv[c] = step > 0.0f ? 1.0f / step : 0.0f;
    store_u16(block + 2 * c, mh);
    store_u16(block + 2 * (head_dim + c), sh);
  }
  const size_t row_bytes = kv_packed_bytes(bits, head_dim);
  uint8_t* rows = block + 4 * static_cast<size_t>(head_dim);
  const uint32_t levels = (1u << bits) - 1;
  for (uint32_t t = 0; t < block_tokens; ++t) {
    uk.codes(keys + static_cast<size_t>(t) * head_dim, mins, inv, head_dim, levels, codes);
    kv_pack_codes(codes, head_dim, bits, rows + t * row_bytes);
  }
}

void kv_float_halves(Isa isa, const float* x, uint32_t n, uint16_t* out) {
  kv_quant_ukernels(isa).float_halves(x, n, out);
}

void kv_quantize_value_row(Isa isa, const float* value, uint32_t head_dim, uint32_t group, uint32_t bits,
                           uint8_t* row) {
  const KvQuantUkernels& uk = kv_quant_ukernels(isa);
  float mins[kKvMaxHeadDim], inv[kKvMaxHeadDim];
  uint8_t codes[kKvMaxHeadDim];
  const uint32_t groups = kv_value_groups(head_dim, group);
  for (uint32_t g = 0; g < groups; ++g) {
    const uint32_t c0 = g * group, n = head_dim - c0 < group ? head_dim - c0 : group;
    float lo, hi, mf, step;
    uk.range(value + c0, n, &lo, &hi);
    uint16_t mh, sh;
    kv_quant_params(lo, hi, bits, &mh, &sh, &mf, &step);
    store_u16(row + 4 * g, mh);
    store_u16(row + 4 * g + 2, sh);
    const float iv = step > 0.0f ? 1.0f / step : 0.0f;
    for (uint32_t c = c0; c < c0 + n; ++c) {
      mins[c] = mf;
      inv[c] = iv;
    }
  }
  uk.codes(value, mins, inv, head_dim, (1u << bits) - 1, codes);
  kv_pack_codes(codes, head_dim, bits, row + 4 * static_cast<size_t>(groups));
}

void kv_dequantize_key_block(const uint8_t* block, uint32_t block_tokens, uint32_t head_dim, uint32_t bits,
                             uint32_t first_token, uint32_t tokens, float* out) {
  const size_t row_bytes = kv_packed_bytes(bits, head_dim);
  const uint8_t* rows = block + 4 * static_cast<size_t>(head_dim);
  for (uint32_t t = 0; t < tokens; ++t) {
    const uint8_t* row = rows + (first_token + t) * row_bytes;
    for (uint32_t c = 0; c < head_dim; ++c) {
      const float mn = f16_to_f32(load_u16(block + 2 * c));
      const float st = f16_to_f32(load_u16(block + 2 * (head_dim + c)));
      out[static_cast<size_t>(t) * head_dim + c] = mn + static_cast<float>(kv_code_at(row, c, bits)) * st;
    }
  }
}

void kv_dequantize_value_row(const uint8_t* row, uint32_t head_dim, uint32_t group, uint32_t bits, float* out) {
  const uint32_t groups = kv_value_groups(head_dim, group);
  const uint8_t* codes = row + 4 * static_cast<size_t>(groups);
  for (uint32_t c = 0; c < head_dim; ++c) {
    const uint32_t g = c / group;
    const float mn = f16_to_f32(load_u16(row + 4 * g));
    const float st = f16_to_f32(load_u16(row + 4 * g + 2));
    out[c] = mn + static_cast<float>(kv_code_at(codes, c, bits)) * st;
  }
}

void kv_requantize_key_block(Isa isa, const uint8_t* block, uint32_t block_tokens, uint32_t head_dim,
                             uint32_t from_bits, uint32_t to_bits, float* scratch, uint8_t* out) {
  kv_dequantize_key_block(block, block_tokens, head_dim, from_bits, 0, block_tokens, scratch);
  kv_quantize_key_block(isa, scratch, block_tokens, head_dim, to_bits, out);
}

void kv_requantize_value_row(Isa isa, const uint8_t* row, uint32_t head_dim, uint32_t group, uint32_t from_bits,
                             uint32_t to_bits, float* scratch, uint8_t* out) {
  kv_dequantize_value_row(row, head_dim, group, from_bits, scratch);
  kv_quantize_value_row(isa, scratch, head_dim, group, to_bits, out);
}

namespace {

// The aged (min, step) of one channel or group: bins of 2^shift codes, centred.
void truncated_params(const uint8_t* min_at, const uint8_t* step_at, uint32_t shift, uint8_t* out_min,
                      uint8_t* out_step) {
  const float mn = f16_to_f32(load_u16(min_at)), st = f16_to_f32(load_u16(step_at));
  // (2^shift - 1)/2 * step is exact in f32 (a few bits times an f16), so the sum rounds once.
  const float centre = mn + static_cast<float>((1u << shift) - 1) * 0.5f * st;
  const float wide = std::fmin(st * static_cast<float>(1u << shift), kF16Max);
  store_u16(out_min, f32_to_f16(std::fmax(std::fmin(centre, kF16Max), -kF16Max)));
  store_u16(out_step, f32_to_f16(wide));
}

void truncate_codes(const uint8_t* packed, uint32_t count, uint32_t from_bits, uint32_t to_bits, uint8_t* out) {
  uint8_t codes[kKvMaxHeadDim];
  for (uint32_t i = 0; i < count; ++i)
    codes[i] = static_cast<uint8_t>(kv_code_at(packed, i, from_bits) >> (from_bits - to_bits));
  kv_pack_codes(codes, count, to_bits, out);
}

}  // namespace

void kv_truncate_key_block(const uint8_t* block, uint32_t block_tokens, uint32_t head_dim, uint32_t from_bits,
                           uint32_t to_bits, uint8_t* out) {
  const uint32_t shift = from_bits - to_bits;
  for (uint32_t c = 0; c < head_dim; ++c)
    truncated_params(block + 2 * c, block + 2 * (head_dim + c), shift, out + 2 * c, out + 2 * (head_dim + c));
  const size_t from_row = kv_packed_bytes(from_bits, head_dim), to_row = kv_packed_bytes(to_bits, head_dim);
  const uint8_t* rows = block + 4 * static_cast<size_t>(head_dim);
  uint8_t* out_rows = out + 4 * static_cast<size_t>(head_dim);
  for (uint32_t t = 0; t < block_tokens; ++t)
    truncate_codes(rows + t * from_row, head_dim, from_bits, to_bits, out_rows + t * to_row);
}

void kv_truncate_value_row(const uint8_t* row, uint32_t head_dim, uint32_t group, uint32_t from_bits, uint32_t to_bits,
                           uint8_t* out) {
  const uint32_t groups = kv_value_groups(head_dim, group);
  for (uint32_t g = 0; g < groups; ++g)
    truncated_params(row + 4 * g, row + 4 * g + 2, from_bits - to_bits, out + 4 * g, out + 4 * g + 2);
  const size_t params = 4 * static_cast<size_t>(groups);
  truncate_codes(row + params, head_dim, from_bits, to_bits, out + params);
}

void kv_hadamard_rotate(float* x, uint32_t head_dim) {
  for (uint32_t h = 1; h < head_dim; h <<= 1) {
    for (uint32_t i = 0; i < head_dim; i += 2 * h) {
      for (uint32_t j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
  const float norm = 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (uint32_t i = 0; i < head_dim; ++i) x[i] *= norm;
}

}  // namespace tern
