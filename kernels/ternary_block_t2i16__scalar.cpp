// Portable reference microkernel for T2Interleaved16 (ternary_block_reference: reads the
// tile bytes exactly as the layout comment describes, one weight at a time).
#include "kernels/ternary_ukernels.h"

namespace tern {

const TernaryBlockKernelInfo ternary_block_t2i16__scalar = {ternary_block_reference<T2iTiles>,
                                                            kTernaryReferenceMaxTokens};

}  // namespace tern
