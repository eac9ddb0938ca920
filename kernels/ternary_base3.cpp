#include "kernels/ternary_base3.h"

namespace tern {
namespace {

constexpr unsigned kPow3Desc[kT3iDigits] = {81, 27, 9, 3, 1};

size_t div_up(size_t n, size_t m) { return (n + m - 1) / m; }

inline uint8_t encode(unsigned v) { return static_cast<uint8_t>((v * 256 + 242) / 243); }

// Byte offset and digit of weight (r, c).
inline void t3i_position(size_t r, size_t c, size_t k_tiles, size_t* byte, unsigned* digit) {
  const size_t block = r / kT3iBlockRows, tile = c / kT3iBlockCols;
  const size_t rr = r % kT3iBlockRows, cc = c % kT3iBlockCols;
  *byte = (block * k_tiles + tile) * kT3iTileBytes + 4 * rr + cc % 4;
  *digit = static_cast<unsigned>(cc / 4);
}

}  // namespace

unsigned t3i_stored_digit(const uint8_t* packed, size_t cols, size_t r, size_t c) {
  size_t byte;
  unsigned digit;
  t3i_position(r, c, div_up(cols, kT3iBlockCols), &byte, &digit);
  // The value whose encoding is this byte: v = floor(byte * 243 / 256).
  return packed[byte] * 243u / 256u / kPow3Desc[digit] % 3;
}

size_t t3i_packed_size(size_t rows, size_t cols) {
  if (rows > SIZE_MAX / 2 || cols > SIZE_MAX / 2) return 0;
  const size_t blocks = div_up(rows, kT3iBlockRows);
  const size_t tiles = div_up(cols, kT3iBlockCols);
  if (tiles != 0 && blocks > SIZE_MAX / kT3iTileBytes / tiles) return 0;
  return blocks * tiles * kT3iTileBytes;
}

Error t3i_pack(const int8_t* codes, size_t rows, size_t cols, uint8_t* out, size_t out_size) {
  if (codes == nullptr || out == nullptr) return fail(Error::InvalidArgument, "t3i_pack: null buffer");
  const size_t need = t3i_packed_size(rows, cols);
  if (need == 0 && rows != 0 && cols != 0) {
    return fail(Error::InvalidArgument, "t3i_pack: %zu x %zu matrix is too large", rows, cols);
  }
  if (out_size < need) return fail(Error::InvalidArgument, "t3i_pack: output %zu < %zu bytes", out_size, need);
  for (size_t i = 0; i < rows * cols; ++i) {
    if (codes[i] < -1 || codes[i] > 1) {
      return fail(Error::InvalidArgument, "t3i_pack: code %d at (%zu, %zu) is not ternary", codes[i], i / cols,
                  i % cols);
    }
  }
  // Accumulate the base-3 values first (padding digits are 1), then scale each byte.
  const size_t k_tiles = div_up(cols, kT3iBlockCols);
  for (size_t b = 0; b < need; ++b) out[b] = 121;  // 11111 in base 3
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      size_t byte;
      unsigned digit;
      t3i_position(r, c, k_tiles, &byte, &digit);
      // Digit 1 -> code + 1: add code * 3^(4-digit); the sum stays in 0..242.
      const int delta = codes[r * cols + c] * static_cast<int>(kPow3Desc[digit]);
      out[byte] = static_cast<uint8_t>(out[byte] + delta);
    }
  }
  for (size_t b = 0; b < need; ++b) out[b] = encode(out[b]);
  return Error::Ok;
}

Error t3i_unpack(const uint8_t* packed, size_t packed_size, size_t rows, size_t cols, int8_t* codes) {
  if (codes == nullptr || packed == nullptr) return fail(Error::InvalidArgument, "t3i_unpack: null buffer");
  if (packed_size < t3i_packed_size(rows, cols)) {
    return fail(Error::Truncated, "t3i_unpack: %zu bytes for a %zu x %zu matrix", packed_size, rows, cols);
  }
  const size_t k_tiles = div_up(cols, kT3iBlockCols);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      size_t byte;
      unsigned digit;
      t3i_position(r, c, k_tiles, &byte, &digit);
      const unsigned v = packed[byte] * 243u / 256u;  // checked back: every byte must encode a value
      if (v > 242 || encode(v) != packed[byte]) {
        return fail(Error::InvalidBundle, "t3i_unpack: byte %u at (%zu, %zu) encodes no base-3 value", packed[byte], r,
                    c);
      }
      codes[r * cols + c] = static_cast<int8_t>(static_cast<int>(t3i_stored_digit(packed, cols, r, c)) - 1);
    }
  }
  return Error::Ok;
}

}  // namespace tern
