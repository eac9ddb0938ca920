#include "kernels/isa.h"

#include <cstdlib>
#include <cstring>

namespace tern {

const char* to_string(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512Vnni: return "avx512vnni";
    case Isa::Neon: return "neon";
    case Isa::NeonDot: return "neondot";
    case Isa::NeonI8mm: return "i8mm";
  }
  return "?";
}

Result<Isa> parse_isa(const char* name) {
  if (name == nullptr) return fail(Error::InvalidArgument, "null ISA name");
  const Isa all[] = {Isa::Scalar, Isa::Avx2, Isa::Avx512Vnni, Isa::Neon, Isa::NeonDot, Isa::NeonI8mm};
  for (Isa isa : all) {
    if (std::strcmp(name, to_string(isa)) == 0) return isa;
  }
  return fail(Error::InvalidArgument,
              "unknown ISA '%s' (expected scalar, avx2, avx512vnni, neon, neondot or i8mm)", name);
}

bool isa_supported(Isa isa, const CpuFeatures& cpu) {
  switch (isa) {
    case Isa::Scalar:
      return true;
#if defined(__x86_64__)
    case Isa::Avx2:
      return cpu.avx2 && cpu.fma3;
    case Isa::Avx512Vnni:
      return cpu.avx512f && cpu.avx512bw && cpu.avx512vl && cpu.avx512vnni;
#endif
#if defined(__aarch64__)
    case Isa::Neon:
      return cpu.neon;
    case Isa::NeonDot:
      return cpu.neon && cpu.neon_dot;
    case Isa::NeonI8mm:
      return cpu.neon && cpu.neon_dot && cpu.neon_i8mm;
#endif
    default:
      return false;
  }
}

Result<Isa> select_isa(const CpuFeatures& cpu) {
  const char* forced = std::getenv("TERN_ISA");
  if (forced != nullptr && forced[0] != '\0') {
    TERN_ASSIGN_OR_RETURN(const Isa isa, parse_isa(forced));
    if (!isa_supported(isa, cpu)) {
      return fail(Error::UnsupportedCpu, "TERN_ISA=%s, but this CPU or build cannot run it", forced);
    }
    return isa;
  }
  const Isa preference[] = {Isa::Avx512Vnni, Isa::Avx2, Isa::NeonI8mm, Isa::NeonDot, Isa::Neon};
  for (Isa isa : preference) {
    if (isa_supported(isa, cpu)) return isa;
  }
  return Isa::Scalar;
}

}  // namespace tern
