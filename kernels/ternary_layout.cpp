#include "kernels/ternary_layout.h"

#include "kernels/ternary_base3.h"

namespace tern {

const char* to_string(TernaryLayout layout) {
  switch (layout) {
    case TernaryLayout::T2RowMajor: return "t2_rowmajor";
    case TernaryLayout::T2Interleaved16: return "t2_interleaved16";
    case TernaryLayout::T3Interleaved16: return "t3_interleaved16";
  }
  return "unknown";
}

bool is_known_layout(uint32_t id) {
  return id == static_cast<uint32_t>(TernaryLayout::T2RowMajor) ||
         id == static_cast<uint32_t>(TernaryLayout::T2Interleaved16) ||
         id == static_cast<uint32_t>(TernaryLayout::T3Interleaved16);
}

TernaryLayout ternary_default_layout() { return TernaryLayout::T2Interleaved16; }

namespace {

size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

// Byte offset and bit shift of weight (r, c) in T2Interleaved16.
inline void t2i_position(size_t r, size_t c, size_t k_tiles, size_t* byte, unsigned* shift) {
  const size_t block = r / kT2iBlockRows, tile = c / kT2iBlockCols;
  const size_t rr = r % kT2iBlockRows, cc = c % kT2iBlockCols;
  *byte = (block * k_tiles + tile) * kT2iTileBytes + 4 * rr + cc % 4;
  *shift = static_cast<unsigned>(2 * (cc / 4));
}

}  // namespace

size_t ternary_packed_size(TernaryLayout layout, size_t rows, size_t cols) {
  switch (layout) {
    case TernaryLayout::T2RowMajor: {
      const size_t row_bytes = (cols + 3) / 4;
      if (rows != 0 && row_bytes > SIZE_MAX / rows) return 0;
      return rows * row_bytes;
    }
    case TernaryLayout::T2Interleaved16: {
      if (rows > SIZE_MAX / 2 || cols > SIZE_MAX / 2) return 0;
      const size_t blocks = round_up(rows, kT2iBlockRows) / kT2iBlockRows;
      const size_t tiles = round_up(cols, kT2iBlockCols) / kT2iBlockCols;
      if (tiles != 0 && blocks > SIZE_MAX / kT2iTileBytes / tiles) return 0;
      return blocks * tiles * kT2iTileBytes;
    }
    case TernaryLayout::T3Interleaved16: return t3i_packed_size(rows, cols);
  }
  return 0;
}

Error ternary_pack(TernaryLayout layout, const int8_t* codes, size_t rows, size_t cols, uint8_t* out, size_t out_size) {
  if (codes == nullptr || out == nullptr) return fail(Error::InvalidArgument, "ternary_pack: null buffer");
  if (!is_known_layout(static_cast<uint32_t>(layout))) {
    return fail(Error::UnsupportedType, "ternary_pack: unknown layout %u", static_cast<unsigned>(layout));
  }
  if (layout == TernaryLayout::T3Interleaved16) return t3i_pack(codes, rows, cols, out, out_size);
  const size_t need = ternary_packed_size(layout, rows, cols);
  if (need == 0 && rows != 0 && cols != 0) {
    return fail(Error::InvalidArgument, "ternary_pack: %zu x %zu matrix is too large", rows, cols);
  }
  if (out_size < need) return fail(Error::InvalidArgument, "ternary_pack: output %zu < %zu bytes", out_size, need);
  for (size_t i = 0; i < rows * cols; ++i) {
    if (codes[i] < -1 || codes[i] > 1) {
      return fail(Error::InvalidArgument, "ternary_pack: code %d at (%zu, %zu) is not ternary", codes[i], i / cols,
                  i % cols);
    }
  }
  for (size_t b = 0; b < need; ++b) out[b] = 0x55;  // padding weights encode 0
  if (layout == TernaryLayout::T2RowMajor) {
    const size_t row_bytes = (cols + 3) / 4;
    for (size_t r = 0; r < rows; ++r) {
      uint8_t* dst = out + r * row_bytes;
      for (size_t c = 0; c < cols; ++c) {
        const unsigned shift = 2 * (c % 4);
        const unsigned v = static_cast<unsigned>(codes[r * cols + c] + 1);
        dst[c / 4] = static_cast<uint8_t>((dst[c / 4] & ~(3u << shift)) | (v << shift));
      }
    }
    return Error::Ok;
  }
  const size_t k_tiles = round_up(cols, kT2iBlockCols) / kT2iBlockCols;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      size_t byte;
      unsigned shift;
      t2i_position(r, c, k_tiles, &byte, &shift);
      const unsigned v = static_cast<unsigned>(codes[r * cols + c] + 1);
      out[byte] = static_cast<uint8_t>((out[byte] & ~(3u << shift)) | (v << shift));
    }
  }
  return Error::Ok;
}

Error ternary_unpack(TernaryLayout layout, const uint8_t* packed, size_t packed_size, size_t rows, size_t cols,
                     int8_t* codes) {
  if (codes == nullptr || packed == nullptr) return fail(Error::InvalidArgument, "ternary_unpack: null buffer");
  if (!is_known_layout(static_cast<uint32_t>(layout))) {
    return fail(Error::UnsupportedType, "ternary_unpack: unknown layout %u", static_cast<unsigned>(layout));
  }
  if (layout == TernaryLayout::T3Interleaved16) return t3i_unpack(packed, packed_size, rows, cols, codes);
  if (packed_size < ternary_packed_size(layout, rows, cols)) {
    return fail(Error::Truncated, "ternary_unpack: %zu bytes for a %zu x %zu matrix", packed_size, rows, cols);
  }
  const size_t row_bytes = (cols + 3) / 4;
  const size_t k_tiles = round_up(cols, kT2iBlockCols) / kT2iBlockCols;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      size_t byte = r * row_bytes + c / 4;
      unsigned shift = static_cast<unsigned>(2 * (c % 4));
      if (layout == TernaryLayout::T2Interleaved16) t2i_position(r, c, k_tiles, &byte, &shift);
      const unsigned v = (packed[byte] >> shift) & 3u;
      if (v == 3) return fail(Error::InvalidBundle, "ternary_unpack: invalid code 3 at (%zu, %zu)", r, c);
      codes[r * cols + c] = static_cast<int8_t>(static_cast<int>(v) - 1);
    }
  }
  return Error::Ok;
}

}  // namespace tern
