// Times the AVX2 token tile's inner loop in the variants of tile_loops.py, in nanoseconds per
// ymm half-tile for 8 tokens (1024 weight-MACs), fixed registers, weights and activations in
// L1. It answers one question per CPU: does broadcasting the activation bytes cost vector ALU
// slots (bcast slower than mem), and would broadcasting them once per tile pay (mem_call)?
// Only the timing counts: the loops' sums are never read, and the plane mask (ymm13) holds
// whatever the compiler left there, which integer instructions do not slow down for.
// Build and run: kernels/tools/avx2_tile_probe/run.sh.
#include <cstdint>
#include <cstdio>
#include <ctime>

#include "tile_loops.h"

namespace {

double now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

constexpr int kTiles = 16;  // one widening chunk: 16 tiles of 64 bytes
alignas(64) uint8_t weights[64 * kTiles];
alignas(64) int8_t activations[8 * 16 * kTiles];
alignas(64) int8_t broadcast[8 * 4 * 32];  // one tile's activation groups, 32 bytes each

#define DEFINE_LOOP(NAME, BODY, HALVES)                                                                             \
  __attribute__((noinline)) double NAME(long reps) {                                                                \
    const double t0 = now();                                                                                        \
    for (long r = 0; r < reps; ++r)                                                                                 \
      for (int i = 0; i < kTiles; ++i)                                                                              \
        __asm__ volatile(BODY                                                                                       \
                         :                                                                                          \
                         : "S"(weights + 64 * i), "D"(activations + 16 * 8 * i), "d"(broadcast)                     \
                         : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", \
                           "xmm11", "xmm12", "xmm14", "memory");                                                    \
    return (now() - t0) * 1e9 / (static_cast<double>(reps) * kTiles * (HALVES));                                    \
  }

DEFINE_LOOP(time_bcast, TILE_LOOP_BCAST, 1)
DEFINE_LOOP(time_mem, TILE_LOOP_MEM, 1)
DEFINE_LOOP(time_reg, TILE_LOOP_REG, 1)
DEFINE_LOOP(time_mem_call, TILE_LOOP_MEM_CALL, 2)

}  // namespace

int main() {
  for (auto& b : weights) b = 0x5a;
  const long reps = 2000000;
  std::printf("| round | bcast | mem | reg | mem_call |\n| ---: | ---: | ---: | ---: | ---: |\n");
  for (int round = 1; round <= 5; ++round) {
    const double b = time_bcast(reps), m = time_mem(reps), g = time_reg(reps), c = time_mem_call(reps);
    std::printf("| %d | %.2f | %.2f | %.2f | %.2f |\n", round, b, m, g, c);
  }
  return 0;
}
