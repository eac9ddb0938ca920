// Prints what Tern sees on this machine: the CPU, its instruction sets, and the kernel every
// family runs. `TERN_ISA=avx2 tern-info` shows the effect of the override.
#include <cstdio>
#include <cstdlib>

#include "kernels/isa.h"
#include "platform/cpu_features.h"
#include "platform/thread_pool.h"
#include "runtime/base/version.h"

int main() {
  const tern::CpuFeatures& cpu = tern::cpu_features();
  char features[256];
  tern::format_cpu_features(cpu, features, sizeof features);
  std::printf("tern %s\n", tern::version_string());
  std::printf("cpu:      %s (%u logical cores%s)\n", cpu.name, cpu.logical_cores,
              cpu.from_cpuinfo ? "" : ", cpuinfo unavailable: OS hwcaps only");
  std::printf("features: %s\n", features);

  const char* forced = std::getenv("TERN_ISA");
  auto flags = tern::isa_flags_with_override(cpu, forced);
  if (!flags.ok()) {
    std::fprintf(stderr, "error: %s: %s\n", tern::to_string(flags.error()), tern::last_error_message());
    return 1;
  }
  std::printf("level:    %s%s\n", tern::to_string(tern::active_isa_level()),
              forced != nullptr && *forced != '\0' ? " (TERN_ISA)" : "");
  tern::KernelChoice choices[16];
  const size_t n = tern::kernel_choices(choices, 16);
  for (size_t i = 0; i < n && i < 16; ++i)
    std::printf("  %-20s %s\n", choices[i].family, tern::to_string(choices[i].isa));
  std::printf("threads:  %zu available cores\n", tern::available_cores());
  return 0;
}
