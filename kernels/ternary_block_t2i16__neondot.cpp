// T2Interleaved16 microkernel for Armv8.2 dotprod: a 64-byte tile is four q-registers
// of 4 rows each; plane j of a register is 4 rows x 4 columns, and SDOT by lane j
// multiplies it by activation bytes 4j..4j+3 of the 16-byte activation vector
// (ternary_block_neon_impl.h).
#include "kernels/ternary_block_neon_impl.h"

namespace tern {

const TernaryBlockKernelInfo ternary_block_t2i16__neondot = ternary_neon::kernel<ternary_neon::T2iPlanes, ternary_neon::Sdot>();

}  // namespace tern
