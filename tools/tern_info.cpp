// Prints what Tern sees on this machine: the CPU, its instruction sets, the kernel every
// family runs, and the large pages the weights can get. `TERN_ISA=avx2 tern-info` shows the
// effect of the override.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/isa.h"
#include "platform/cpu_features.h"
#include "platform/large_pages.h"
#include "platform/thread_pool.h"
#include "runtime/base/version.h"

namespace {

const char kUsage[] =
    "Usage: tern-info [--help | --version]\n"
    "Print the CPU Tern sees, its instruction sets, the kernel each family runs and the large\n"
    "pages the weights can get.\n"
    "\n"
    "Environment:\n"
    "  TERN_ISA   cap the instruction-set level (scalar, avx2, avx512, avx512vnni, neon, neondot, i8mm)\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {
    if (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (std::strcmp(argv[1], "--version") == 0) {
      std::printf("tern-info %s\n", tern::version_string());
      return 0;
    }
    std::fputs(kUsage, stderr);
    return 2;
  }
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
  // What weights_pages "auto" and "copy" can get (their report: tern-run, tern-bench).
  char policy[16];
  tern::transparent_huge_pages_policy(policy, sizeof policy);
  if (const size_t large = tern::large_page_bytes(); large > 0) {
    std::printf("pages:    %zu KiB large pages (transparent huge pages: %s)\n", large >> 10,
                policy[0] != '\0' ? policy : "unknown");
  } else {
    std::printf("pages:    no large pages here\n");
  }
  return 0;
}
