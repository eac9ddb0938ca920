// Detected features must agree with an independent source: the kernel's /proc/cpuinfo
// on real hardware, or the CPU model qemu was told to emulate (QEMU_CPU).
#include "platform/cpu_features.h"

#include <gtest/gtest.h>
#include <stdlib.h>

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

TEST(Isa, SelectionFollowsFeaturesAndOverride) {
  const CpuFeatures& f = cpu_features();
  unsetenv("TERN_ISA");
  auto best = select_isa(f);
  ASSERT_TRUE(best.ok());
  EXPECT_TRUE(isa_supported(*best, f));
#if defined(__x86_64__)
  if (f.avx512vnni && f.avx512bw && f.avx512vl) {
    EXPECT_EQ(*best, Isa::Avx512Vnni);
  } else if (f.avx2 && f.fma3) {
    EXPECT_EQ(*best, Isa::Avx2);
  }
  EXPECT_FALSE(isa_supported(Isa::Neon, f));
#elif defined(__aarch64__)
  if (f.neon_i8mm) {
    EXPECT_EQ(*best, Isa::NeonI8mm);
  } else if (f.neon_dot) {
    EXPECT_EQ(*best, Isa::NeonDot);
  } else {
    EXPECT_EQ(*best, Isa::Neon);
  }
  EXPECT_FALSE(isa_supported(Isa::Avx2, f));
#endif

  setenv("TERN_ISA", "scalar", 1);
  auto forced = select_isa(f);
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ(*forced, Isa::Scalar);

  setenv("TERN_ISA", "sse9", 1);
  EXPECT_EQ(select_isa(f).error(), Error::InvalidArgument);

#if defined(__x86_64__)
  setenv("TERN_ISA", "neondot", 1);
#else
  setenv("TERN_ISA", "avx2", 1);
#endif
  EXPECT_EQ(select_isa(f).error(), Error::UnsupportedCpu);
  unsetenv("TERN_ISA");
}

TEST(Isa, NamesRoundTrip) {
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512Vnni, Isa::Neon, Isa::NeonDot, Isa::NeonI8mm}) {
    auto parsed = parse_isa(to_string(isa));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, isa);
  }
}

}  // namespace
}  // namespace tern
