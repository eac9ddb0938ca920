// A first-order model of decode speed per ternary layout on a device, for tern-plan: a
// decoded token reads every weight once and multiplies every ternary weight once, so
//   time per token = max(ternary weights x cycles per weight / (clock x threads),
//                        bytes per token / read bandwidth)
// Attention, KV reads, norms and the lm_head's arithmetic are left out: an upper bound,
// and one that ranks the layouts (they differ only in those two terms).
// The same model as kernels/tools/predict_tok_s.py; docs/perf/2026-11-24-base3.md has its
// inputs and their sources.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/isa.h"
#include "kernels/ternary_layout.h"

namespace tern {

struct DecodeDevice {
  const char* name;   // "pi4", "pi5"
  const char* cores;  // the CPU the cycle counts are for
  double clock_ghz;
  double read_gb_per_s;            // sustained DRAM read bandwidth
  Isa ternary_isa;                 // the level whose kernels the cycle counts measure
  double t2i16_cycles_per_weight;  // one token, llvm-mca
  double t3i16_cycles_per_weight;
};

// The devices with measured cycle counts; nullptr for any other name.
const DecodeDevice* find_decode_device(const char* name);

// What one decoded token costs: ternary weights multiplied and bytes read.
struct DecodeWork {
  double ternary_weights = 0;  // every ternary matrix's rows x cols
  double ternary_bytes = 0;    // those matrices in the layout being predicted
  double other_bytes = 0;      // the rest a token reads: lm_head (with its scales), norms
};

// Predicted tokens per second; 0 for a layout without SIMD kernels (T2RowMajor) or no threads.
double predict_decode_tok_s(const DecodeDevice& device, TernaryLayout layout, const DecodeWork& work, unsigned threads);

}  // namespace tern
