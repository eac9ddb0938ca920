// Choices the user makes when converting; shared by every importer and the writer.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "kernels/dense_matmul.h"
#include "kernels/ternary_layout.h"

namespace tern::convert {

struct ConvertOptions {
  // Precision of tok_embeddings / lm_head in the bundle.
  DenseType embed_type = DenseType::F16;
  uint32_t embed_group = 64;  // Q8/Q4 group size in columns
  // Layout ternary matrices are packed in.
  TernaryLayout ternary_layout = ternary_default_layout();  // what the kernels read fastest
  // Without a tokenizer the bundle cannot run; only tests and format work may skip it.
  bool require_tokenizer = true;
  // Explicit tokenizer path overriding the one found beside the checkpoint.
  std::string tokenizer_path;
  // A chat template overriding the checkpoint's: tokenizer_config.json or template text.
  std::string chat_template_path;
  bool progress = true;  // progress bar on stderr
  // Called by importers as work completes (step name, done, total); may be empty.
  std::function<void(const char* step, uint64_t done, uint64_t total)> on_progress;
  uint64_t seed = 1234;  // synthetic weights
  // Keep only the first N transformer layers (0: all). The result is a self-speculative
  // draft for the same checkpoint: same tokenizer, embeddings, final norm and lm_head,
  // a fraction of the work per token (tern-run --draft).
  uint32_t keep_layers = 0;
};

}  // namespace tern::convert
