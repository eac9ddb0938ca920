// Dense attention with NEON (f16 caches widened by FCVTL on load): a key block is two
// float32x4 (eight keys' element i); values in chunks of 16 columns. vmulq + vaddq, never the
// fused vfmaq (-ffp-contract=off).
#include "kernels/dense_attention_impl.h"
#include "kernels/f32_vec_neon.h"

namespace tern {

const DenseAttentionUkernels dense_attention__neon = dense_attention_impl::ukernels<F32x4, 1, 4, 0>();

}  // namespace tern
