// What the CPU can do, detected once (cpuinfo, plus getauxval on aarch64 Linux for
// the bits this cpuinfo version cannot report). Kernel dispatch reads this.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern {

enum class CpuArch { X86_64, Aarch64, Other };

struct CpuFeatures {
  CpuArch arch = CpuArch::Other;
  bool from_cpuinfo = false;  // false: cpuinfo could not initialize, features from the OS only

  // x86-64
  bool avx2 = false;
  bool fma3 = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512vnni = false;

  // aarch64
  bool neon = false;
  bool neon_dot = false;   // SDOT/UDOT (Armv8.2 dotprod; Cortex-A76, Pi 5)
  bool neon_i8mm = false;  // SMMLA/USDOT (Armv8.6 i8mm)
  bool neon_fp16 = false;  // half-precision arithmetic

  uint32_t logical_cores = 1;
  char name[96] = {0};
};

const CpuFeatures& cpu_features();

const char* to_string(CpuArch arch);
// One line such as "x86_64: avx2 fma3 f16c avx512f avx512bw avx512vl avx512vnni".
void format_cpu_features(const CpuFeatures& f, char* out, size_t capacity);

}  // namespace tern
