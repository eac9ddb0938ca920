// Every kernel family's choice in one list (tern-info prints it) and the one place that
// makes them all at load.
#include "kernels/dense_attention.h"
#include "kernels/dense_matmul.h"
#include "kernels/isa.h"
#include "kernels/kv_quant.h"
#include "kernels/ternary_matmul.h"

namespace tern {

size_t kernel_choices(KernelChoice* out, size_t capacity) {
  const KernelChoice all[] = {
      {"ternary_block", ternary_active_isa()},
      {"ternary_block_t3i16", ternary_active_isa(TernaryLayout::T3Interleaved16)},
      {"quantize_absmax", quantize_active_isa()},
      {"dense_gemv", dense_gemv_active_isa()},
      {"dense_gemv_i8", dense_gemv_i8_active_isa()},
      {"kv_quant", kv_quant_active_isa()},
      {"kv_attention", kv_attention_active_isa()},
      {"dense_attention", dense_attention_active_isa()},
  };
  const size_t n = sizeof(all) / sizeof(all[0]);
  for (size_t i = 0; i < n && i < capacity; ++i) out[i] = all[i];
  return n;
}

void init_kernels() { (void)kernel_choices(nullptr, 0); }

}  // namespace tern
