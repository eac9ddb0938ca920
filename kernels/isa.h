// One vocabulary for instruction sets, and table-driven kernel choice (as XNNPACK's
// hardware config + per-op tables). The CPU's features become one flag set, once; TERN_ISA
// can cap it to a named level; every kernel family keeps an ordered table of
// {level, kernel} and runs the first entry whose level's flags the capped set holds. The
// scalar entry ends every table, so there is always one.
//
// Adding a level: a flag (if it needs a new instruction set), a row of kLevels in isa.cpp,
// the compile flags for its file suffix in kernels/CMakeLists.txt (tern_kernel_sources),
// and a row in the tables of the families that have a kernel for it (kernels/README.md).
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/cpu_features.h"
#include "platform/error.h"

namespace tern {

// Instruction-set features the kernels use.
enum IsaFlag : uint32_t {
  kIsaAvx2 = 1u << 0,        // x86-64 AVX2 + FMA + F16C
  kIsaAvx512 = 1u << 1,      // AVX-512 F/BW/VL
  kIsaAvx512Vnni = 1u << 2,  // + VNNI (VPDPBUSD)
  kIsaNeon = 1u << 3,        // aarch64 Advanced SIMD
  kIsaNeonDot = 1u << 4,     // + SDOT/UDOT (Armv8.2 dotprod)
  kIsaNeonI8mm = 1u << 5,    // + SMMLA (Armv8.6 i8mm)
};
using IsaFlags = uint32_t;

// Named levels: each is a set of flags, and the name kernel files carry as their suffix.
enum class Isa : int {
  Scalar = 0,
  Avx2,
  Avx512,
  Avx512Vnni,
  Neon,
  NeonDot,
  NeonI8mm,
};
// Every level, for tests and benchmarks that run each family at each one the CPU supports.
inline constexpr Isa kIsaLevels[] = {Isa::Scalar, Isa::Avx2,    Isa::Avx512,  Isa::Avx512Vnni,
                                     Isa::Neon,   Isa::NeonDot, Isa::NeonI8mm};
const char* to_string(Isa isa);
// Parses "scalar", "avx2", "avx512", "avx512vnni", "neon", "neondot", "i8mm".
Result<Isa> parse_isa(const char* name);
IsaFlags isa_level_flags(Isa isa);

// The flags of `cpu` for which this build has kernels (an x86 build never reports NEON).
IsaFlags cpu_isa_flags(const CpuFeatures& cpu);
// True when this build has kernels for `isa` and the CPU runs them (TERN_ISA aside).
bool isa_supported(Isa isa, const CpuFeatures& cpu);
// The CPU's flags capped by `override` (a level name; null or "": none): InvalidArgument for
// an unknown name, UnsupportedCpu for a level the CPU cannot run.
Result<IsaFlags> isa_flags_with_override(const CpuFeatures& cpu, const char* override);
// What the kernels run with: cpu_features() capped by TERN_ISA, computed once (an invalid
// TERN_ISA is logged and ignored). The level it names, or the best the CPU runs.
IsaFlags active_isa_flags();
Isa active_isa_level();

// One row of a kernel family's table.
template <typename Kernel>
struct IsaKernel {
  Isa isa;
  Kernel kernel;
};

// The first row whose level's flags are all in `flags` (tables end with Scalar).
template <typename Kernel, size_t N>
const IsaKernel<Kernel>& isa_select(const IsaKernel<Kernel> (&table)[N], IsaFlags flags) {
  for (size_t i = 0; i < N; ++i) {
    const IsaFlags need = isa_level_flags(table[i].isa);
    if ((need & flags) == need) return table[i];
  }
  return table[N - 1];
}
// The row of level `isa`, or null when the family has no kernel for it.
template <typename Kernel, size_t N>
const IsaKernel<Kernel>* isa_find(const IsaKernel<Kernel> (&table)[N], Isa isa) {
  for (size_t i = 0; i < N; ++i)
    if (table[i].isa == isa) return &table[i];
  return nullptr;
}

// Every kernel family's choice, for tern-info: family name and the level it runs.
struct KernelChoice {
  const char* family;
  Isa isa;
};
// Fills up to `capacity` choices; returns how many families there are.
size_t kernel_choices(KernelChoice* out, size_t capacity);
// Chooses every family's kernels now (CPU detection allocates): call at load, never inside
// the first prefill.
void init_kernels();

}  // namespace tern
