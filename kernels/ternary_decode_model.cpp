#include "kernels/ternary_decode_model.h"

#include <cstring>

namespace tern {
namespace {

// Cycles per weight: llvm-mca on GCC 12's inner loops, one token, cycles per 64-byte tile
// over its weights (docs/perf/2026-11-24-base3.md, "llvm-mca"; `sh kernels/tools/mca.sh`),
// as kernels/tools/predict_tok_s.py rounds them: t2i16 NEON 8.08 / 64 (its loop runs one 4-row
// register of a tile), t3i16 NEON 72.6 / 320 (the A72 has no dotprod); t2i16 dotprod 16.05 / 256,
// t3i16 dotprod 56.6 / 320.
// Bandwidth: Pi 4 STREAM Scale 5561.9 MB/s (https://www.sci-pi.org.uk/bench/stream.html);
// Pi 5 7.4 GB/s is an estimate (LPDDR4X-4267 x 32 bit at the Pi 4's 43 % STREAM
// efficiency), not a measurement. Clocks: BCM2711 1.8 GHz, BCM2712 2.4 GHz.
// The phone is a Snapdragon 855-class one (the 6 GB tern-plan device): Cortex-A76 big cores,
// the three at 2.42 GHz (the 2.84 GHz prime core left out), LPDDR4X 4 x 16 bit at 34.1 GB/s
// peak, 14.7 GB/s at the same 43 % efficiency: an estimate too.
constexpr DecodeDevice kDecodeDevices[] = {
    {"pi4", "Cortex-A72", 1.8, 5.56, Isa::Neon, 0.1263, 0.2270},
    {"pi5", "Cortex-A76", 2.4, 7.4, Isa::NeonDot, 0.0627, 0.1769},
    {"android6g", "Cortex-A76 (Snapdragon 855 class)", 2.42, 14.7, Isa::NeonDot, 0.0627, 0.1769},
};

}  // namespace

const DecodeDevice* find_decode_device(const char* name) {
  for (const DecodeDevice& d : kDecodeDevices)
    if (name != nullptr && std::strcmp(d.name, name) == 0) return &d;
  return nullptr;
}

double predict_decode_tok_s(const DecodeDevice& device, TernaryLayout layout, const DecodeWork& work,
                            unsigned threads) {
  double cycles_per_weight = 0;
  if (layout == TernaryLayout::T2Interleaved16) cycles_per_weight = device.t2i16_cycles_per_weight;
  if (layout == TernaryLayout::T3Interleaved16) cycles_per_weight = device.t3i16_cycles_per_weight;
  if (cycles_per_weight == 0 || threads == 0) return 0;
  // Threads split the rows evenly; they share one memory bus.
  const double compute_s = work.ternary_weights * cycles_per_weight / (device.clock_ghz * 1e9 * threads);
  const double memory_s = (work.ternary_bytes + work.other_bytes) / (device.read_gb_per_s * 1e9);
  const double seconds = compute_s > memory_s ? compute_s : memory_s;
  return seconds > 0 ? 1.0 / seconds : 0;
}

}  // namespace tern
