// Base-3 tile microkernel for plain Armv8 NEON (Cortex-A72): the five digit planes of
// each 4-row register (multiply-shift, as in the dotprod kernel) go through SMULL/SMLAL
// against their activation group duplicated to 4 lanes, summed in int16 (at most
// 5 * 2 * 128), then folded into int32 with ADDP + SADALP as in the t2i16 kernel
// (ternary_block_neon_impl.h).
#include "kernels/ternary_block_neon_impl.h"

namespace tern {

const TernaryBlockKernelInfo ternary_block_t3i16__neon =
    ternary_neon::kernel<ternary_neon::T3iPlanes, ternary_neon::Smull>();

}  // namespace tern
