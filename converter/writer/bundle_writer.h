// Writes `.tern` bundles (layout in schema/README.md). Tensor bytes are produced one
// tensor at a time by a callback and streamed to the file, so a converter never needs
// the whole packed model in memory (the synthetic 2B-4T generator relies on this).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "converter/ir/convert_options.h"
#include "converter/ir/model_ir.h"
#include "kernels/dense_matmul.h"
#include "kernels/ternary_layout.h"
#include "platform/error.h"
#include "runtime/model/bundle.h"
#include "runtime/model/model_config.h"

namespace tern::convert {

inline constexpr uint32_t kBundleFormatVersion = 1;
inline constexpr uint64_t kSegmentAlign = 64;

// Receives a segment's bytes in order.
class SegmentSink {
 public:
  virtual ~SegmentSink() = default;
  virtual Error write(const void* data, size_t size) = 0;
  // `size` zero bytes; large runs become holes in the file (sparse, nothing written).
  virtual Error write_zeros(uint64_t size) = 0;
};

struct TensorSpec {
  std::string name;
  std::vector<uint64_t> shape;
  TensorType type = TensorType::Dense;
  DenseType dense_type = DenseType::F32;
  TernaryLayout layout = TernaryLayout::T2RowMajor;
  float scale = 1.0f;
  uint32_t group = 0;  // Q8/Q4
  // Writes exactly data_size() bytes; for Q8/Q4 also appends exactly scale_count() scales.
  std::function<Error(SegmentSink& data, std::vector<float>& group_scales)> produce;

  uint64_t rows() const;
  uint64_t cols() const;
  uint64_t elements() const;
  uint64_t data_size() const;
  uint64_t scale_count() const;
};

struct KvHeadProfileIR {
  uint32_t layer = 0;
  uint32_t kv_head = 0;
  float shannon_entropy = 0.0f;
  float renyi2_entropy = 0.0f;
  uint8_t kv_class = 0;  // schema::KvClass
  uint8_t key_bits = 16;
  uint8_t value_bits = 16;
  bool sink = false;
  std::vector<float> sensitivity;            // one per KvProfileIR::sensitivity_widths entry
  std::vector<float> query_shannon_entropy;  // the query heads reading this KV head
};

// Widths of every head at one average (layer-major, 0 = exact), and the rule that chose them.
struct KvAllocationIR {
  float average_bits = 0.0f;
  std::vector<uint8_t> key_bits;
  std::vector<uint8_t> value_bits;
  std::string rule;
};

struct KvProfileIR {
  std::vector<KvHeadProfileIR> heads;
  uint32_t sink_tokens = 0;
  uint32_t recent_window = 0;
  uint32_t group_size = 0;
  float average_bits = 16.0f;
  std::string provenance;
  std::vector<uint8_t> sensitivity_widths;
  uint32_t sensitivity_tokens = 0;
  std::vector<KvAllocationIR> allocations;  // ascending average_bits
  uint32_t value_group = 0;
};

struct BundleContents {
  ModelConfig config;
  std::optional<TokenizerIR> tokenizer;  // empty tokenizer table when absent
  std::string source_format;
  std::string source_path;
  std::string options;  // e.g. "embed=f16"
  std::vector<TensorSpec> tensors;
  std::optional<KvProfileIR> kv_profile;
  EmbeddingPromptsIR embedding;  // written when config.embedding
  // Record the file's checksum (schema/README.md). false: none, as bundles written before it
  // had (tests of old bundles).
  bool checksum = true;
};

struct WriteStats {
  size_t tensors = 0;
  uint64_t file_size = 0;
  uint64_t header_size = 0;  // FlatBuffer incl. tokenizer
  uint64_t ternary_bytes = 0;
  uint64_t ternary_weights = 0;
  uint64_t embedding_bytes = 0;    // tok_embeddings + lm_head incl. group scales
  uint64_t other_dense_bytes = 0;  // norms
  uint64_t checksum_header = 0;    // the recorded XXH64 values (0: none recorded)
  uint64_t checksum_data = 0;
  double seconds = 0.0;
};

// (step, done, total) in bytes; called often, keep it cheap.
using ProgressFn = std::function<void(const char* step, uint64_t done, uint64_t total)>;

Result<WriteStats> write_bundle(const std::string& path, const BundleContents& contents,
                                const ProgressFn& progress = nullptr);

// Dense rows [rows][cols] of float32 converted to `type` and written to `sink`; Q8/Q4
// group scales appended to `scales`. Used by every producer of dense tensors.
Error write_dense_rows(DenseType type, uint32_t group, const float* values, uint64_t rows, uint64_t cols,
                       SegmentSink& sink, std::vector<float>& scales);

// Specs that read from `ir` (which must outlive the write): ternary tensors packed in
// options.ternary_layout, tok_embeddings/lm_head in options.embed_type, other floats F32.
BundleContents contents_from_ir(const ModelIR& ir, const ConvertOptions& options);

std::string describe_options(const ConvertOptions& options);

}  // namespace tern::convert
