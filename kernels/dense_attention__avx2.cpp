// Dense attention with AVX2 (f16 caches widened by F16C on load): a key block is one ymm
// (eight keys' element i); key steps of two blocks, values in chunks of 16 columns. Multiply
// and add stay separate (-ffp-contract=off on this file).
#include "kernels/dense_attention_impl.h"
#include "kernels/f32_vec_avx2.h"

namespace tern {

const DenseAttentionUkernels dense_attention__avx2 = dense_attention_impl::ukernels<F32x8, 2, 2, 1>();

}  // namespace tern
