#include "kernels/isa.h"

#include <cstdlib>
#include <cstring>

#include "platform/log.h"

namespace tern {

namespace {

struct Level {
  Isa isa;
  const char* name;
  IsaFlags flags;
};

constexpr Level kLevels[] = {
    {Isa::Scalar, "scalar", 0},
    {Isa::Avx2, "avx2", kIsaAvx2},
    {Isa::Avx512, "avx512", kIsaAvx2 | kIsaAvx512},
    {Isa::Avx512Vnni, "avx512vnni", kIsaAvx2 | kIsaAvx512 | kIsaAvx512Vnni},
    {Isa::Neon, "neon", kIsaNeon},
    {Isa::NeonDot, "neondot", kIsaNeon | kIsaNeonDot},
    {Isa::NeonI8mm, "i8mm", kIsaNeon | kIsaNeonDot | kIsaNeonI8mm},
};

const Level& level(Isa isa) {
  for (const Level& l : kLevels)
    if (l.isa == isa) return l;
  return kLevels[0];
}

}  // namespace

const char* to_string(Isa isa) { return level(isa).name; }
IsaFlags isa_level_flags(Isa isa) { return level(isa).flags; }

Result<Isa> parse_isa(const char* name) {
  if (name == nullptr) return fail(Error::InvalidArgument, "null ISA name");
  for (const Level& l : kLevels)
    if (std::strcmp(name, l.name) == 0) return l.isa;
  return fail(Error::InvalidArgument,
              "unknown ISA '%s' (expected scalar, avx2, avx512, avx512vnni, neon, neondot or i8mm)", name);
}

IsaFlags cpu_isa_flags(const CpuFeatures& cpu) {
  IsaFlags f = 0;
#if defined(__x86_64__)
  if (cpu.avx2 && cpu.fma3 && cpu.f16c) f |= kIsaAvx2;
  if (cpu.avx512f && cpu.avx512bw && cpu.avx512vl) f |= kIsaAvx512;
  if ((f & kIsaAvx512) && cpu.avx512vnni) f |= kIsaAvx512Vnni;
#endif
#if defined(__aarch64__)
  if (cpu.neon) f |= kIsaNeon;
  if (cpu.neon && cpu.neon_dot) f |= kIsaNeonDot;
  if (cpu.neon && cpu.neon_dot && cpu.neon_i8mm) f |= kIsaNeonI8mm;
#endif
  (void)cpu;
  return f;
}

bool isa_supported(Isa isa, const CpuFeatures& cpu) {
  const IsaFlags need = isa_level_flags(isa);
  return (cpu_isa_flags(cpu) & need) == need;
}

Result<IsaFlags> isa_flags_with_override(const CpuFeatures& cpu, const char* override) {
  const IsaFlags flags = cpu_isa_flags(cpu);
  if (override == nullptr || override[0] == '\0') return flags;
  TERN_ASSIGN_OR_RETURN(const Isa isa, parse_isa(override));
  if (!isa_supported(isa, cpu)) {
    return fail(Error::UnsupportedCpu, "TERN_ISA=%s, but this CPU or build cannot run it", override);
  }
  return isa_level_flags(isa);
}

namespace {

struct Active {
  IsaFlags flags;
  Isa level;
};

Active choose_active() {
  const CpuFeatures& cpu = cpu_features();
  Result<IsaFlags> flags = isa_flags_with_override(cpu, std::getenv("TERN_ISA"));
  if (!flags.ok()) {
    TERN_LOG_WARNING("kernels: %s; using the best supported ISA instead", last_error_message());
    flags = cpu_isa_flags(cpu);
  }
  Active a{*flags, Isa::Scalar};
  for (const Level& l : kLevels)  // the richest level within the flags
    if ((l.flags & *flags) == l.flags && __builtin_popcount(l.flags) > __builtin_popcount(isa_level_flags(a.level)))
      a.level = l.isa;
  return a;
}

const Active& active() {
  static const Active a = choose_active();  // once, thread-safe
  return a;
}

}  // namespace

IsaFlags active_isa_flags() { return active().flags; }
Isa active_isa_level() { return active().level; }

}  // namespace tern
