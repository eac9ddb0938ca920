#include "platform/cpu_features.h"

#include <cpuinfo.h>

#include <cstdio>
#include <cstring>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1UL << 1)
#endif
#ifndef HWCAP_ASIMDHP
#define HWCAP_ASIMDHP (1UL << 10)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1UL << 13)
#endif
#endif

namespace tern {
namespace {

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__)
  f.arch = CpuArch::X86_64;
#elif defined(__aarch64__)
  f.arch = CpuArch::Aarch64;
#endif
  f.from_cpuinfo = cpuinfo_initialize();
  if (f.from_cpuinfo) {
    f.logical_cores = cpuinfo_get_processors_count();
    const cpuinfo_package* pkg = cpuinfo_get_package(0);
    if (pkg != nullptr) std::snprintf(f.name, sizeof f.name, "%s", pkg->name);
#if defined(__x86_64__)
    f.avx2 = cpuinfo_has_x86_avx2();
    f.fma3 = cpuinfo_has_x86_fma3();
    f.f16c = cpuinfo_has_x86_f16c();
    f.avx512f = cpuinfo_has_x86_avx512f();
    f.avx512bw = cpuinfo_has_x86_avx512bw();
    f.avx512vl = cpuinfo_has_x86_avx512vl();
    f.avx512vnni = cpuinfo_has_x86_avx512vnni();
#elif defined(__aarch64__)
    f.neon = cpuinfo_has_arm_neon();
    f.neon_dot = cpuinfo_has_arm_neon_dot();
    f.neon_fp16 = cpuinfo_has_arm_neon_fp16_arith();
#endif
  }
#if defined(__aarch64__) && defined(__linux__)
  // The kernel's hwcaps are the ground truth cpuinfo reads too; this cpuinfo has no
  // i8mm query, and under qemu-user cpuinfo may fail on the host's /proc/cpuinfo.
  const unsigned long hwcap = getauxval(AT_HWCAP);
  const unsigned long hwcap2 = getauxval(AT_HWCAP2);
  f.neon_i8mm = (hwcap2 & HWCAP2_I8MM) != 0;
  if (!f.from_cpuinfo) {
    f.neon = (hwcap & HWCAP_ASIMD) != 0;
    f.neon_dot = (hwcap & HWCAP_ASIMDDP) != 0;
    f.neon_fp16 = (hwcap & HWCAP_ASIMDHP) != 0;
  }
#endif
  if (f.logical_cores == 0) f.logical_cores = 1;
  if (f.name[0] == '\0') std::snprintf(f.name, sizeof f.name, "%s", to_string(f.arch));
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();  // thread-safe one-time init
  return features;
}

const char* to_string(CpuArch arch) {
  switch (arch) {
    case CpuArch::X86_64: return "x86_64";
    case CpuArch::Aarch64: return "aarch64";
    case CpuArch::Other: return "other";
  }
  return "?";
}

void format_cpu_features(const CpuFeatures& f, char* out, size_t capacity) {
  if (capacity == 0) return;
  size_t used = static_cast<size_t>(std::snprintf(out, capacity, "%s:", to_string(f.arch)));
  const struct {
    bool on;
    const char* name;
  } flags[] = {
      {f.avx2, "avx2"},
      {f.fma3, "fma3"},
      {f.f16c, "f16c"},
      {f.avx512f, "avx512f"},
      {f.avx512bw, "avx512bw"},
      {f.avx512vl, "avx512vl"},
      {f.avx512vnni, "avx512vnni"},
      {f.neon, "neon"},
      {f.neon_dot, "dotprod"},
      {f.neon_i8mm, "i8mm"},
      {f.neon_fp16, "fp16"},
  };
  for (const auto& flag : flags) {
    if (!flag.on || used >= capacity) continue;
    used += static_cast<size_t>(std::snprintf(out + used, capacity - used, " %s", flag.name));
  }
}

}  // namespace tern
