// The instruction-set levels kernels are written for, and the choice among them.
#pragma once

#include "platform/cpu_features.h"
#include "platform/error.h"

namespace tern {

enum class Isa : int {
  Scalar = 0,
  Avx2,        // x86-64 AVX2 + FMA
  Avx512Vnni,  // x86-64 AVX-512 F/BW/VL + VNNI
  Neon,        // aarch64 Advanced SIMD
  NeonDot,     // + SDOT (Armv8.2 dotprod)
  NeonI8mm,    // + SMMLA (Armv8.6 i8mm)
};

const char* to_string(Isa isa);
// Parses "scalar", "avx2", "avx512vnni", "neon", "neondot", "i8mm".
Result<Isa> parse_isa(const char* name);
// True when this build has kernels for `isa` and the CPU runs them.
bool isa_supported(Isa isa, const CpuFeatures& cpu);
// The best supported level, or the one TERN_ISA names (an error if that one cannot run here).
Result<Isa> select_isa(const CpuFeatures& cpu);

}  // namespace tern
