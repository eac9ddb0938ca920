// T2Interleaved16 microkernel for plain Armv8 NEON (Cortex-A72, no dotprod): SMULL /
// SMLAL multiply each plane (4 rows x 4 columns, weights code + 1) by its activation
// group duplicated to 4 lanes, summing the 4 planes in int16 (at most 4 * 2 * 128);
// ADDP + SADALP then fold each row's 4 lanes into int32 (ternary_block_neon_impl.h).
#include "kernels/ternary_block_neon_impl.h"

namespace tern {

const TernaryBlockKernelInfo ternary_block_t2i16__neon = ternary_neon::kernel<ternary_neon::T2iPlanes, ternary_neon::Smull>();

}  // namespace tern
