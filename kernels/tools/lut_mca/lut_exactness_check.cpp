// Exactness check for the LUT probe: random and extreme codes / activations, odd
// column counts, and more than 255 tiles (the int16 chunk boundary), against a naive
// sum over unpacked codes and against the scalar T2Interleaved16 kernel; the NEON table
// build against the scalar one, byte for byte.
// Build and run: see README.md in this folder.
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/ternary_ukernels.h"
#include "kernels/tools/lut_mca/ternary_lut_t2i16_neon_probe.cpp"

namespace {

// Packs one 16-row block (codes in {-1, 0, 1}, row-major 16 x cols) as the layout
// comment in ternary_layout.h describes; padding columns get code 0 (stored 1).
std::vector<uint8_t> pack_block(const std::vector<int>& codes, size_t cols) {
  const size_t k_tiles = (cols + 15) / 16;
  std::vector<uint8_t> block(k_tiles * 64, 0);
  for (size_t kt = 0; kt < k_tiles; ++kt)
    for (size_t r = 0; r < 16; ++r)
      for (size_t c = 0; c < 16; ++c) {
        const size_t col = kt * 16 + c;
        const int v = (col < cols ? codes[r * cols + col] : 0) + 1;
        block[kt * 64 + 4 * r + c % 4] |= static_cast<uint8_t>(v << (2 * (c / 4)));
      }
  return block;
}

}  // namespace

int main() {
  std::mt19937 rng(16);
  const size_t shapes[] = {1, 15, 16, 17, 20, 100, 2560, 4080, 4081, 4096, 6912};
  int failures = 0, cases = 0;
  for (size_t cols : shapes) {
    for (int pattern = 0; pattern < 4; ++pattern) {
      std::vector<int> codes(16 * cols);
      std::vector<int8_t> q(cols);
      for (size_t i = 0; i < codes.size(); ++i)
        codes[i] = pattern == 1 ? 1 : pattern == 2 ? -1 : static_cast<int>(rng() % 3) - 1;
      for (size_t c = 0; c < cols; ++c)
        q[c] = pattern == 1   ? -128
               : pattern == 2 ? 127
               : pattern == 3 ? (c % 2 ? -128 : 127)
                              : static_cast<int8_t>(rng() & 255);
      const std::vector<uint8_t> block = pack_block(codes, cols);
      const size_t k_tiles = (cols + 15) / 16;
      std::vector<int8_t> tables(k_tiles * tern_probe::kTableBytesPerTile);
      tern_probe::lut_build_tables(q.data(), cols, tables.data());
      std::vector<int8_t> tables_neon(tables.size());
      tern_probe::lut_build_tables_neon(q.data(), cols, tables_neon.data());
      if (tables_neon != tables) {
        std::printf("TABLES DIFFER cols=%zu pattern=%d\n", cols, pattern);
        ++failures;
      }
      int32_t lut[16], lut_d[16], ref[16];
      tern_probe::lut_block_t2i16(block.data(), k_tiles, tables.data(), lut);
      tern_probe::lut_block_t2i16_d(block.data(), k_tiles, tables.data(), lut_d);
      tern::ternary_block_t2i16__scalar.fn(block.data(), cols, q.data(), cols, 1, ref);
      for (size_t r = 0; r < 16; ++r) {
        long naive = 0;
        for (size_t c = 0; c < cols; ++c) naive += (codes[r * cols + c] + 1) * q[c];
        if (lut[r] != naive || lut_d[r] != naive || ref[r] != naive) {
          if (failures < 10)
            std::printf("MISMATCH cols=%zu pattern=%d row=%zu lut=%d lut_d=%d scalar=%d naive=%ld\n", cols, pattern, r,
                        lut[r], lut_d[r], ref[r], naive);
          ++failures;
        }
      }
      ++cases;
    }
  }
  std::printf("%d cases x 16 rows, %d mismatches\n", cases, failures);
  return failures != 0;
}
