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
};

const char* to_string(TernaryLayout layout);
bool is_known_layout(uint32_t id);

// Bytes needed to hold a rows x cols matrix in `layout` (0 on overflow).
size_t ternary_packed_size(TernaryLayout layout, size_t rows, size_t cols);
// Packs codes (row-major, values in {-1,0,1}); InvalidArgument on any other value.
Error ternary_pack(TernaryLayout layout, const int8_t* codes, size_t rows, size_t cols, uint8_t* out,
                   size_t out_size);
// The inverse: writes rows*cols codes.
Error ternary_unpack(TernaryLayout layout, const uint8_t* packed, size_t packed_size, size_t rows, size_t cols,
                     int8_t* codes);

}  // namespace tern
