// Prints what Tern sees on this machine: CPU, instruction sets, and the kernel level
// it would run. `TERN_ISA=scalar tern-info` shows the effect of the override.
#include <xnnpack.h>

#include <cstdio>

#include "kernels/isa.h"
#include "platform/cpu_features.h"
#include "platform/thread_pool.h"
#include "runtime/version.h"

int main() {
  const tern::CpuFeatures& cpu = tern::cpu_features();
  char features[256];
  tern::format_cpu_features(cpu, features, sizeof features);
  std::printf("tern %s\n", tern::version_string());
  std::printf("cpu:      %s (%u logical cores%s)\n", cpu.name, cpu.logical_cores,
              cpu.from_cpuinfo ? "" : ", cpuinfo unavailable: OS hwcaps only");
  std::printf("features: %s\n", features);

  auto isa = tern::select_isa(cpu);
  if (!isa.ok()) {
    std::fprintf(stderr, "error: %s: %s\n", tern::to_string(isa.error()), tern::last_error_message());
    return 1;
  }
  std::printf("kernels:  %s\n", tern::to_string(*isa));

  auto pool = tern::ThreadPool::create(0);
  if (!pool.ok()) {
    std::fprintf(stderr, "error: %s\n", tern::last_error_message());
    return 1;
  }
  std::printf("threads:  %zu\n", pool->num_threads());
  const xnn_status xs = xnn_initialize(nullptr);
  std::printf("xnnpack:  %s\n", xs == xnn_status_success ? "ok" : "unavailable on this CPU");
  return 0;
}
