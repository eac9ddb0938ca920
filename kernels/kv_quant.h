// Quantized KV storage formats and the kernels that write them.
//
// Keys are quantized per channel over a block of `block_tokens` consecutive tokens
// (KIVI: key outliers live in fixed channels, so a channel's range is tight across
// tokens); values per token over groups of `value_group` channels. Each group carries
// an f16 minimum and an f16 step: x ≈ min + code * step, code in [0, 2^bits - 1].
// The f16 pair is rounded outward (min down, step up) so [min, min + L*step] always
// covers the data and every element is within step/2 of its reconstruction.
//
// Codes are packed as a little-endian bit stream per row: code i occupies bits
// [i*bits, (i+1)*bits) counting from bit 0 of byte 0. For 3 bits this puts 8 codes in
// every 3 bytes; a row of n codes takes ceil(n*bits/8) bytes.
//
// Key block layout:  f16 min[head_dim], f16 step[head_dim], then block_tokens rows of
//                    packed codes (row t = token t, head_dim codes).
// Value row layout:  per group g: f16 min, f16 step (interleaved), then head_dim packed codes.
//
// SIMD kernels read whole 8-code chunks and may load up to kKvReadPadding bytes past
// the last code of a row, so storage holding rows ends with that much slack.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/isa.h"
#include "kernels/with_constant.h"
#include "platform/error.h"

namespace tern {

// The KV kernels have avx512 (F/BW/VL), avx2 (+FMA+F16C), neon and scalar versions; a
// function given a level runs the best of them within it (kernels/isa.h).
Isa kv_quant_active_isa();
Isa kv_attention_active_isa();

constexpr size_t kKvReadPadding = 16;
constexpr uint32_t kKvMaxHeadDim = 512;
// Query heads the attention kernels serve in one pass over a block (a GQA group, or part of it).
constexpr uint32_t kKvMaxQueries = 4;

// Q = queries (1..kKvMaxQueries), so each query's accumulators are a fixed set of registers.
template <typename F>
inline auto with_query_count(uint32_t queries, F&& f) {
  return with_constant<uint32_t, 1, 2, 3, kKvMaxQueries>(queries, f);
}
static_assert(kKvMaxQueries == 4, "with_query_count covers 1..4 queries");

inline bool kv_bits_supported(uint32_t bits) { return bits == 2 || bits == 3 || bits == 4 || bits == 8; }
inline size_t kv_packed_bytes(uint32_t bits, size_t count) { return (count * bits + 7) / 8; }
inline uint32_t kv_value_groups(uint32_t head_dim, uint32_t group) { return (head_dim + group - 1) / group; }

// Bytes of one key block / one value row (no padding).
inline size_t kv_key_block_bytes(uint32_t bits, uint32_t head_dim, uint32_t block_tokens) {
  return static_cast<size_t>(head_dim) * 4 + block_tokens * kv_packed_bytes(bits, head_dim);
}
inline size_t kv_value_row_bytes(uint32_t bits, uint32_t head_dim, uint32_t group) {
  return static_cast<size_t>(kv_value_groups(head_dim, group)) * 4 + kv_packed_bytes(bits, head_dim);
}

// Checks a format: bits in {2,3,4,8}, 0 < head_dim <= kKvMaxHeadDim, block_tokens > 0,
// value_group a positive multiple of 8 (so SIMD chunks never straddle two groups).
Error kv_format_validate(uint32_t key_bits, uint32_t value_bits, uint32_t head_dim, uint32_t block_tokens,
                         uint32_t value_group);

void kv_pack_codes(const uint8_t* codes, size_t count, uint32_t bits, uint8_t* out);
void kv_unpack_codes(const uint8_t* packed, size_t count, uint32_t bits, uint8_t* codes);

// The outward-rounded f16 (min, step) for data in [lo, hi] at `bits`; also returns them as floats.
void kv_quant_params(float lo, float hi, uint32_t bits, uint16_t* min_h, uint16_t* step_h, float* min_f, float* step_f);

// Writes the key block of `block_tokens` rows (token-major, head_dim floats each).
void kv_quantize_key_block(Isa isa, const float* keys, uint32_t block_tokens, uint32_t head_dim, uint32_t bits,
                           uint8_t* block);
// Writes one value row.
void kv_quantize_value_row(Isa isa, const float* value, uint32_t head_dim, uint32_t group, uint32_t bits, uint8_t* row);
// out[i] = f32_to_f16(x[i]) (kernels/half.h) for n floats, bit for bit on every ISA: the f16
// caches' exact rows.
void kv_float_halves(Isa isa, const float* x, uint32_t n, uint16_t* out);

// Reconstruction (reference path and the KvCache read interface).
void kv_dequantize_key_block(const uint8_t* block, uint32_t block_tokens, uint32_t head_dim, uint32_t bits,
                             uint32_t first_token, uint32_t tokens, float* out);
void kv_dequantize_value_row(const uint8_t* row, uint32_t head_dim, uint32_t group, uint32_t bits, float* out);

// Re-quantization (the KV cache's aging tier): a stored block or row at `from_bits` becomes
// one at `to_bits`, computed from the stored codes (no original is kept): the scalar
// reconstruction min + code*step, quantized again with `isa`'s kernels. The same bytes on
// every ISA and architecture: code*step is exact in f32 (code < 2^8, step an f16 of 11
// significant bits), so the reconstruction rounds once with or without FMA contraction, and
// quantization gives the same bytes on every ISA (kernels test). Error against the original
// data adds up: at most step_from/2 + step_to/2 per element. `scratch` holds
// block_tokens * head_dim floats (keys) or head_dim floats (values).
void kv_requantize_key_block(Isa isa, const uint8_t* block, uint32_t block_tokens, uint32_t head_dim,
                             uint32_t from_bits, uint32_t to_bits, float* scratch, uint8_t* out);
void kv_requantize_value_row(Isa isa, const uint8_t* row, uint32_t head_dim, uint32_t group, uint32_t from_bits,
                             uint32_t to_bits, float* scratch, uint8_t* out);

// Aging by truncation (the KV cache's default): each code keeps its top `to_bits` bits,
// c' = c >> (from - to), i.e. 2^from codes fall into 2^to bins of 2^(from-to) neighbours,
// each reconstructed at its centre: step' = step * 2^(from-to) (exact in f16) and
// min' = min + (2^(from-to) - 1)/2 * step (rounded to the nearest f16). Integer work on the
// stored codes, one scalar implementation, so the same bytes everywhere. Error against the
// original data <= 2^(from-to-1) * step (+ half an f16 ulp of min'): 4>2 is 2/15 of the
// block's range where quantizing the original to 2 bits directly is 1/6, and re-quantizing
// (above) compounds step_from/2 + step_to/2.
void kv_truncate_key_block(const uint8_t* block, uint32_t block_tokens, uint32_t head_dim, uint32_t from_bits,
                           uint32_t to_bits, uint8_t* out);
void kv_truncate_value_row(const uint8_t* row, uint32_t head_dim, uint32_t group, uint32_t from_bits, uint32_t to_bits,
                           uint8_t* out);

// Normalized Walsh-Hadamard transform: orthonormal and its own inverse, so rotating
// keys and queries leaves q·k unchanged and rotating the attention output undoes the
// rotation of the values. Spreads channel outliers over all channels before quantizing.
inline bool kv_rotation_supported(uint32_t head_dim) { return head_dim >= 2 && (head_dim & (head_dim - 1)) == 0; }
void kv_hadamard_rotate(float* x, uint32_t head_dim);

}  // namespace tern
