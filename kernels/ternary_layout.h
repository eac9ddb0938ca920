// How ternary weights are laid out in memory (and in a bundle). The converter packs
// with these functions; the kernels read the same bytes straight from the mmap'd file.
//
// Every layout packs a row-major [rows][cols] matrix of codes in {-1, 0, +1}.
// Layout ids are stored in bundles: append new ids, never renumber.
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/error.h"

namespace tern {

enum class TernaryLayout : uint32_t {
  // T2 row-major: 2 bits per weight, 4 weights per byte, weight j of a row at bits
  // 2*(j % 4) of byte j / 4, stored as code + 1 (0 = -1, 1 = 0, 2 = +1). Rows padded to
  // whole bytes. The reference layout: simple, and what tests compare against.
  //
  //   byte:  [w3 w3 | w2 w2 | w1 w1 | w0 w0]   (bit 7 ... bit 0)
  T2RowMajor = 1,

  // T2 interleaved, 16-row blocks (the kernels' layout): still 2 bits per weight stored
  // as code + 1, but ordered so that one 64-byte load holds a 16 x 16 tile and each
  // 2-bit plane of it is a ready operand for a 4-byte dot product (x86 VPDPBUSD /
  // PMADDUBSW, Arm SDOT by lane, or widening multiplies on plain NEON). Every ISA reads
  // the same bytes, so one bundle runs everywhere.
  //
  // Rows are padded to a multiple of 16 and columns to a multiple of 16 with code 0.
  // Row block b (rows 16b .. 16b+15) is stored contiguously, its K/16 tiles in column
  // order; tile (b, t) starts at byte 64 * (b * K/16 + t).
  //
  //   64-byte tile = rows r 0..15 x columns c 0..15 of the block
  //
  //   byte i = 4*r + m            (r = i / 4, m = i % 4)
  //   bits [2j+1 : 2j] of byte i = code(r, 4j + m) + 1      (plane j = 0..3)
  //
  //           byte 0        byte 1             byte 3        byte 4 ...  byte 63
  //         +------------+------------+ ... +------------+------------+ ... +------------+
  //   bits  |c12 c8 c4 c0|c13 c9 c5 c1| ... |c15 c11 c7 c3|c12 c8 c4 c0| ... |c15 ... c3  |
  //         |   row 0    |   row 0    |     |   row 0    |   row 1    |     |   row 15   |
  //         +------------+------------+ ... +------------+------------+ ... +------------+
  //          (bit 7 ... bit 0: plane 3 | plane 2 | plane 1 | plane 0)
  //
  // (byte >> 2j) & 3 over the 64 bytes gives plane j: 16 rows x 4 consecutive columns
  // 4j..4j+3, i.e. 16 int32 dot-product lanes against the activation bytes 4j..4j+3
  // broadcast to every lane.
  T2Interleaved16 = 2,

  // T3 interleaved, 16-row blocks ("t3i16", kernels/ternary_base3.h): 5 weights per byte
  // in base 3, 1.6 bits per weight. Same 16-row blocks and 64-byte tiles as
  // T2Interleaved16, but a tile holds 16 rows x 20 columns: byte i = 4*r + m carries
  // code(r, 4j + m) + 1 as base-3 digit j (j = 0..4, digit 0 most significant), the
  // value scaled to ceil(v * 256 / 243) so a kernel reads digit j by multiply and shift.
  // Rows are padded to 16 and columns to 20 with code 0. 20% fewer bytes per token than
  // T2Interleaved16 for a little more arithmetic per weight: faster where decode is
  // bandwidth-bound (docs/perf/2026-11-24-base3.md), so the converter writes it on request.
  T3Interleaved16 = 3,
};

// Rows and columns per tile of T2Interleaved16, and bytes per tile.
constexpr size_t kT2iBlockRows = 16;
constexpr size_t kT2iBlockCols = 16;
constexpr size_t kT2iTileBytes = 64;

// The layout the converter writes by default: the fastest one every ISA path supports.
TernaryLayout ternary_default_layout();

const char* to_string(TernaryLayout layout);
bool is_known_layout(uint32_t id);

// Bytes needed to hold a rows x cols matrix in `layout` (0 on overflow).
size_t ternary_packed_size(TernaryLayout layout, size_t rows, size_t cols);
// Packs codes (row-major, values in {-1,0,1}); InvalidArgument on any other value.
Error ternary_pack(TernaryLayout layout, const int8_t* codes, size_t rows, size_t cols, uint8_t* out, size_t out_size);
// The inverse: writes rows*cols codes.
Error ternary_unpack(TernaryLayout layout, const uint8_t* packed, size_t packed_size, size_t rows, size_t cols,
                     int8_t* codes);

}  // namespace tern
