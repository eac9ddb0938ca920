// Dense attention with AVX2 (f16 caches widened by F16C on load): a key block is one ymm
// (eight keys' element i); key steps of two blocks, values in chunks of 16 columns. Multiply
// and add stay separate (-ffp-contract=off on this file).
#include "kernels/dense_attention_impl.h"
#include "kernels/f32_vec_avx2.h"

namespace tern {
namespace {

struct Avx2 : F32x8<Avx2> {
  static constexpr uint32_t kScoreBlocks = 2, kValueWide = 2, kValueNarrow = 1;
};

}  // namespace

const DenseAttentionUkernels dense_attention__avx2 = dense_attention_impl::ukernels<Avx2>();

}  // namespace tern
