// Base-3 packed ternary tiles ("t3i16"): 5 weights per byte, 1.6 bits per weight, against
// 2 bits for T2Interleaved16. Same 16-row blocks and the same +1 code convention, so a
// kernel unpacks a tile into the planes the t2i16 kernels already consume and runs the
// same int8 dot products (the driver subtracts Σq the same way).
//
// The bundle layout TernaryLayout::T3Interleaved16 (tern-convert --ternary-packing base3);
// these functions and the scalar kernel define the format.
//
//   64-byte tile = rows r 0..15 x columns c 0..19 of the block
//   byte i = 4*r + m                      (r = i / 4, m = i % 4)
//   digits d_j = code(r, 4j + m) + 1      (j = 0..4, d in {0, 1, 2})
//   v = Σ_j d_j * 3^(4-j)                 (0..242, digit 0 most significant)
//   byte = ceil(v * 256 / 243)
//
// Scaling v to a fraction of 256 lets a kernel read digit j without division:
//   d_j = (((byte * 3^j) mod 256) * 3) >> 8
// (multiplying by 3^j shifts the base-3 fraction j digits left; the mod drops the digits
// already read; * 3 >> 8 takes the next one). Every one of the 243 values decodes exactly;
// the layout test checks all of them against division.
//
// Digit j of the 64 bytes is plane j: 16 rows x columns 4j..4j+3, as in T2Interleaved16.
// Rows are padded to 16 and columns to 20 with code 0 (digit 1).
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/error.h"

namespace tern {

constexpr size_t kT3iBlockRows = 16;
constexpr size_t kT3iBlockCols = 20;
constexpr size_t kT3iTileBytes = 64;
constexpr size_t kT3iDigits = 5;

// Digit j (0..4) of a packed byte, by multiply and shift.
inline unsigned t3i_digit(uint8_t byte, unsigned j) {
  static constexpr uint8_t kPow3[kT3iDigits] = {1, 3, 9, 27, 81};
  const unsigned shifted = static_cast<uint8_t>(byte * kPow3[j]);
  return (shifted * 3u) >> 8;
}

// Bytes for a rows x cols matrix (0 on overflow).
size_t t3i_packed_size(size_t rows, size_t cols);
// Packs row-major codes in {-1, 0, 1}; InvalidArgument on any other value or a short buffer.
Error t3i_pack(const int8_t* codes, size_t rows, size_t cols, uint8_t* out, size_t out_size);
// code(r, c) + 1 of a t3i16 matrix of `cols` columns, decoded by division (the reference
// that the kernels' multiply-shift and ternary_matmul_int32_reference read). No byte check.
unsigned t3i_stored_digit(const uint8_t* packed, size_t cols, size_t r, size_t c);
// The inverse, decoding by division (independent of t3i_digit); InvalidBundle on a byte
// that no value 0..242 encodes, Truncated on a short buffer.
Error t3i_unpack(const uint8_t* packed, size_t packed_size, size_t rows, size_t cols, int8_t* codes);

}  // namespace tern
