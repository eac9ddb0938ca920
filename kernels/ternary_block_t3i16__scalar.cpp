// Portable reference microkernel for the base-3 tiles (ternary_base3.h): one weight at a
// time, each digit read with the multiply-shift a vector kernel would use (t3i_digit).
#include "kernels/ternary_ukernels.h"

namespace tern {

const TernaryBlockKernelInfo ternary_block_t3i16__scalar = {ternary_block_reference<T3iTiles>,
                                                            kTernaryReferenceMaxTokens};

}  // namespace tern
