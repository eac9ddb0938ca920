// Dense attention with NEON (f16 caches widened by FCVTL on load): a key block is two
// float32x4 (eight keys' element i); values in chunks of 16 columns. vmulq + vaddq, never the
// fused vfmaq (-ffp-contract=off).
#include "kernels/dense_attention_impl.h"
#include "kernels/f32_vec_neon.h"

namespace tern {
namespace {

struct Neon : F32x4<Neon> {
  static constexpr uint32_t kScoreBlocks = 1, kValueWide = 4, kValueNarrow = 0;
};

}  // namespace

const DenseAttentionUkernels dense_attention__neon = dense_attention_impl::ukernels<Neon>();

}  // namespace tern
