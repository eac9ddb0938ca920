// Base-3 tile microkernel for Armv8.2 dotprod (ternary_base3.h): each of the four
// q-registers of a tile (4 rows) yields five digit planes by multiply-shift, and plane j
// goes to SDOT by lane against activation bytes 4j..4j+3 (plane 4: bytes 16..19, a
// second register; ternary_block_neon_impl.h).
#include "kernels/ternary_block_neon_impl.h"

namespace tern {

const TernaryBlockKernelInfo ternary_block_t3i16__neondot =
    ternary_neon::kernel<ternary_neon::T3iPlanes, ternary_neon::Sdot>();

}  // namespace tern
