// What a decoded token of a bundle multiplies and reads, counted from its tensor table: the
// one count behind tern-bench's bandwidth bound and tern-plan's per-device prediction.
#pragma once

#include <cstring>

#include "kernels/dense_matmul.h"
#include "kernels/ternary_decode_model.h"
#include "kernels/ternary_layout.h"
#include "platform/error.h"
#include "runtime/model/bundle.h"
#include "runtime/model/tensor_names.h"

namespace tern::cli {

// Every ternary matrix once, its bytes as packed in `layout` (the bundle's own or another),
// and the rest a token reads: the classifier with its group scales and the norms. Of
// tok_embeddings a token reads one row, so it counts only when it is also the classifier.
inline Result<DecodeWork> bundle_decode_work(const Bundle& b, TernaryLayout layout) {
  DecodeWork w;
  for (size_t i = 0; i < b.tensor_count(); ++i) {
    TERN_ASSIGN_OR_RETURN(const TensorView v, b.tensor_at(i));
    const size_t cols = v.shape[v.ndim - 1];
    size_t rows = 1;
    for (uint32_t d = 0; d + 1 < v.ndim; ++d) rows *= v.shape[d];
    if (v.type == TensorType::Ternary) {
      w.ternary_weights += static_cast<double>(rows) * static_cast<double>(cols);
      w.ternary_bytes += static_cast<double>(ternary_packed_size(layout, rows, cols));
      continue;
    }
    if (std::strcmp(v.name, tensor_names::kTokEmbeddings) == 0 && !b.config().tied_embeddings) continue;
    w.other_bytes += static_cast<double>(v.size_bytes);
    if (v.group_scales != nullptr) {
      w.other_bytes += static_cast<double>(dense_scale_count(v.dense_type, rows, cols, v.group) * sizeof(float));
    }
  }
  return w;
}

}  // namespace tern::cli
