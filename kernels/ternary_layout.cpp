#include "kernels/ternary_layout.h"

namespace tern {

const char* to_string(TernaryLayout layout) {
  switch (layout) {
    case TernaryLayout::T2RowMajor: return "t2_rowmajor";
  }
  return "unknown";
}

bool is_known_layout(uint32_t id) { return id == static_cast<uint32_t>(TernaryLayout::T2RowMajor); }

size_t ternary_packed_size(TernaryLayout layout, size_t rows, size_t cols) {
  switch (layout) {
    case TernaryLayout::T2RowMajor: {
      const size_t row_bytes = (cols + 3) / 4;
      if (rows != 0 && row_bytes > SIZE_MAX / rows) return 0;
      return rows * row_bytes;
    }
  }
  return 0;
}

Error ternary_pack(TernaryLayout layout, const int8_t* codes, size_t rows, size_t cols, uint8_t* out,
                   size_t out_size) {
  if (codes == nullptr || out == nullptr) return fail(Error::InvalidArgument, "ternary_pack: null buffer");
  if (layout != TernaryLayout::T2RowMajor) return fail(Error::UnsupportedType, "ternary_pack: unknown layout");
  const size_t need = ternary_packed_size(layout, rows, cols);
  if (out_size < need) return fail(Error::InvalidArgument, "ternary_pack: output %zu < %zu bytes", out_size, need);
  const size_t row_bytes = (cols + 3) / 4;
  for (size_t r = 0; r < rows; ++r) {
    uint8_t* dst = out + r * row_bytes;
    for (size_t b = 0; b < row_bytes; ++b) dst[b] = 0x55;  // padding weights encode 0
    for (size_t c = 0; c < cols; ++c) {
      const int8_t v = codes[r * cols + c];
      if (v < -1 || v > 1) {
        return fail(Error::InvalidArgument, "ternary_pack: code %d at (%zu, %zu) is not ternary", v, r, c);
      }
      const unsigned shift = 2 * (c % 4);
      dst[c / 4] = static_cast<uint8_t>((dst[c / 4] & ~(3u << shift)) | (static_cast<unsigned>(v + 1) << shift));
    }
  }
  return Error::Ok;
}

Error ternary_unpack(TernaryLayout layout, const uint8_t* packed, size_t packed_size, size_t rows, size_t cols,
                     int8_t* codes) {
  if (codes == nullptr || packed == nullptr) return fail(Error::InvalidArgument, "ternary_unpack: null buffer");
  if (layout != TernaryLayout::T2RowMajor) return fail(Error::UnsupportedType, "ternary_unpack: unknown layout");
  if (packed_size < ternary_packed_size(layout, rows, cols)) {
    return fail(Error::Truncated, "ternary_unpack: %zu bytes for a %zu x %zu matrix", packed_size, rows, cols);
  }
  const size_t row_bytes = (cols + 3) / 4;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      const unsigned v = (packed[r * row_bytes + c / 4] >> (2 * (c % 4))) & 3u;
      if (v == 3) return fail(Error::InvalidBundle, "ternary_unpack: invalid code 3 at (%zu, %zu)", r, c);
      codes[r * cols + c] = static_cast<int8_t>(static_cast<int>(v) - 1);
    }
  }
  return Error::Ok;
}

}  // namespace tern
