// Detected features must agree with an independent source: the kernel's /proc/cpuinfo
// on real hardware, or the CPU model qemu was told to emulate (QEMU_CPU).
#include "platform/cpu_features.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "kernels/isa.h"

namespace tern {
namespace {

// The flag words of the first "flags" (x86) or "Features" (arm) line of /proc/cpuinfo.
std::set<std::string> proc_cpuinfo_flags(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string k = line.substr(0, colon);
    while (!k.empty() && (k.back() == ' ' || k.back() == '\t')) k.pop_back();
    if (k != key) continue;
    std::istringstream words(line.substr(colon + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

TEST(CpuFeatures, DetectionIsStableAndNamed) {
  const CpuFeatures& a = cpu_features();
  const CpuFeatures& b = cpu_features();
  EXPECT_EQ(&a, &b);
  EXPECT_GE(a.logical_cores, 1u);
  EXPECT_NE(a.name[0], '\0');
  char text[256];
  format_cpu_features(a, text, sizeof text);
  EXPECT_EQ(std::string(text).rfind(to_string(a.arch), 0), 0u) << text;
}

#if defined(__x86_64__)
TEST(CpuFeatures, MatchesProcCpuinfoOnX86) {
  const auto flags = proc_cpuinfo_flags("flags");
  if (flags.empty()) GTEST_SKIP() << "/proc/cpuinfo has no flags line";
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(f.arch, CpuArch::X86_64);
  EXPECT_TRUE(f.from_cpuinfo);
  EXPECT_EQ(f.avx2, flags.count("avx2") == 1);
  EXPECT_EQ(f.fma3, flags.count("fma") == 1);
  EXPECT_EQ(f.f16c, flags.count("f16c") == 1);
  EXPECT_EQ(f.avx512f, flags.count("avx512f") == 1);
  EXPECT_EQ(f.avx512bw, flags.count("avx512bw") == 1);
  EXPECT_EQ(f.avx512vl, flags.count("avx512vl") == 1);
  EXPECT_EQ(f.avx512vnni, flags.count("avx512_vnni") == 1);
  EXPECT_FALSE(f.neon);
}
#endif

#if defined(__aarch64__)
TEST(CpuFeatures, MatchesEmulatedOrRealArmCpu) {
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(f.arch, CpuArch::Aarch64);
  EXPECT_TRUE(f.neon);
  const char* qemu_cpu = getenv("QEMU_CPU");
  const auto flags = proc_cpuinfo_flags("Features");
  if (qemu_cpu != nullptr && qemu_cpu[0] != '\0') {
    const std::string model = qemu_cpu;
    // What qemu's models implement: A72 is Armv8.0 (no dotprod), A76 is Armv8.2 with
    // dotprod, "max" has everything qemu knows, i8mm included.
    if (model == "cortex-a72") {
      EXPECT_FALSE(f.neon_dot);
      EXPECT_FALSE(f.neon_i8mm);
    } else if (model == "cortex-a76") {
      EXPECT_TRUE(f.neon_dot);
      EXPECT_FALSE(f.neon_i8mm);
    } else if (model == "max") {
      EXPECT_TRUE(f.neon_dot);
      EXPECT_TRUE(f.neon_i8mm);
    } else {
      GTEST_SKIP() << "no expectation for QEMU_CPU=" << model;
    }
  } else if (!flags.empty()) {
    EXPECT_EQ(f.neon_dot, flags.count("asimddp") == 1);
    EXPECT_EQ(f.neon_i8mm, flags.count("i8mm") == 1);
  } else {
    GTEST_SKIP() << "neither QEMU_CPU nor /proc/cpuinfo Features to compare with";
  }
}
#endif

TEST(Isa, FlagsFollowTheFeaturesAndTheOverrideCapsThem) {
  const CpuFeatures& f = cpu_features();
  const IsaFlags flags = cpu_isa_flags(f);
#if defined(__x86_64__)
  EXPECT_EQ((flags & kIsaAvx2) != 0, f.avx2 && f.fma3 && f.f16c);
  EXPECT_EQ((flags & kIsaAvx512Vnni) != 0, f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni);
  EXPECT_EQ(flags & (kIsaNeon | kIsaNeonDot | kIsaNeonI8mm), 0u);
  EXPECT_FALSE(isa_supported(Isa::Neon, f));
#elif defined(__aarch64__)
  EXPECT_EQ((flags & kIsaNeonDot) != 0, f.neon_dot);
  EXPECT_EQ((flags & kIsaNeonI8mm) != 0, f.neon_dot && f.neon_i8mm);
  EXPECT_EQ(flags & (kIsaAvx2 | kIsaAvx512 | kIsaAvx512Vnni), 0u);
  EXPECT_FALSE(isa_supported(Isa::Avx2, f));
#endif
  // Without an override: the CPU's flags. Each supported level caps them to its own.
  EXPECT_EQ(*isa_flags_with_override(f, nullptr), flags);
  EXPECT_EQ(*isa_flags_with_override(f, ""), flags);
  for (Isa isa : kIsaLevels) {
    auto capped = isa_flags_with_override(f, to_string(isa));
    if (isa_supported(isa, f)) {
      ASSERT_TRUE(capped.ok()) << to_string(isa);
      EXPECT_EQ(*capped, isa_level_flags(isa));
      EXPECT_EQ(*capped & flags, *capped) << "a level never adds what the CPU lacks";
    } else {
      EXPECT_EQ(capped.error(), Error::UnsupportedCpu) << to_string(isa);
    }
  }
  EXPECT_EQ(*isa_flags_with_override(f, "scalar"), 0u);
  EXPECT_EQ(isa_flags_with_override(f, "sse9").error(), Error::InvalidArgument);
  // The active level is supported, and without TERN_ISA the richest one the CPU has.
  EXPECT_TRUE(isa_supported(active_isa_level(), f));
  if (std::getenv("TERN_ISA") == nullptr) {
    EXPECT_EQ(active_isa_flags(), flags);
  }
}

// Each family's table, through isa_select: the first row within the flags, scalar last.
TEST(Isa, TablesPickTheFirstRowWithinTheFlags) {
  const IsaKernel<int> table[] = {{Isa::Avx512Vnni, 3}, {Isa::Avx2, 2}, {Isa::NeonDot, 1}, {Isa::Scalar, 0}};
  EXPECT_EQ(isa_select(table, isa_level_flags(Isa::Avx512Vnni)).kernel, 3);
  EXPECT_EQ(isa_select(table, isa_level_flags(Isa::Avx512)).kernel, 2);  // no VNNI: the AVX2 row
  EXPECT_EQ(isa_select(table, isa_level_flags(Isa::Avx2)).kernel, 2);
  EXPECT_EQ(isa_select(table, isa_level_flags(Isa::NeonI8mm)).kernel, 1);
  EXPECT_EQ(isa_select(table, isa_level_flags(Isa::Neon)).kernel, 0);
  EXPECT_EQ(isa_select(table, 0).kernel, 0);
  EXPECT_EQ(isa_find(table, Isa::Avx2)->kernel, 2);
  EXPECT_EQ(isa_find(table, Isa::Neon), nullptr);
  // Every family's choice is a level the CPU runs.
  KernelChoice choices[16];
  const size_t n = kernel_choices(choices, 16);
  ASSERT_GE(n, 7u);
  for (size_t i = 0; i < n; ++i) EXPECT_TRUE(isa_supported(choices[i].isa, cpu_features())) << choices[i].family;
}

TEST(Isa, NamesRoundTrip) {
  for (Isa isa : kIsaLevels) {
    auto parsed = parse_isa(to_string(isa));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, isa);
  }
}

}  // namespace
}  // namespace tern
