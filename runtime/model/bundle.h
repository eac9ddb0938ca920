// A verified, read-only view of a `.tern` bundle: the FlatBuffer header plus 64-byte
// aligned tensor segments, mmap'd zero-copy. Everything is checked in open(); after
// that, lookups cannot read outside the file.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dense_matmul.h"
#include "kernels/ternary_matmul.h"
#include "platform/error.h"
#include "platform/file_map.h"
#include "runtime/model/model_config.h"

namespace tern {
namespace schema {
struct Bundle;
struct Tokenizer;
struct KvProfile;
struct Embedding;
}  // namespace schema

enum class TensorType : uint32_t {
  Dense = 0,    // see DenseType
  Ternary = 1,  // see TernaryLayout
};

struct TensorView {
  const char* name = nullptr;
  TensorType type = TensorType::Dense;
  uint32_t ndim = 0;
  uint64_t shape[4] = {0, 0, 0, 0};
  const uint8_t* data = nullptr;
  uint64_t size_bytes = 0;
  // Ternary
  TernaryLayout layout = TernaryLayout::T2RowMajor;
  float scale = 1.0f;  // multiply convention
  // Dense
  DenseType dense_type = DenseType::F32;
  const float* group_scales = nullptr;  // Q8/Q4
  uint32_t group = 0;

  TernaryMatrix as_ternary() const;  // precondition: type == Ternary, ndim == 2
  DenseMatrix as_dense() const;      // precondition: type == Dense
};

// What Bundle::verify_checksum() found (schema/README.md, "Checksum").
struct BundleChecksum {
  bool recorded = false;                        // false: the bundle records none (converted before issue 39)
  uint64_t header = 0, data = 0;                // recorded XXH64 values
  uint64_t header_actual = 0, data_actual = 0;  // computed from the file
  uint64_t bytes = 0;                           // bytes read
};

class Bundle {
 public:
  // Maps and verifies a bundle file: identifier, version, FlatBuffers verifier, every
  // tensor's offset/size against the file, config sanity. Errors name the problem.
  static Result<Bundle> open(const char* path, MapMode mode = MapMode::Auto);
  // Verifies a bundle already in memory (not owned; must outlive the Bundle).
  static Result<Bundle> from_memory(const uint8_t* data, size_t size);

  Bundle() = default;
  Bundle(Bundle&&) noexcept = default;
  Bundle& operator=(Bundle&&) noexcept = default;

  const ModelConfig& config() const { return config_; }
  // UnknownTensor (with the name in the message) when absent.
  Result<TensorView> tensor(const char* name) const;
  // "layers.<layer>.<suffix>"
  Result<TensorView> layer_tensor(uint32_t layer, const char* suffix) const;
  bool has_tensor(const char* name) const;
  size_t tensor_count() const;
  Result<TensorView> tensor_at(size_t index) const;

  const schema::Bundle* root() const { return root_; }
  const schema::Tokenizer* tokenizer() const;   // never null after open()
  const schema::KvProfile* kv_profile() const;  // null when the bundle was not calibrated
  const schema::Embedding* embedding() const;   // null unless an embedding model

  const uint8_t* data() const { return data_; }
  // FNV-1a of the FlatBuffer header (config, tensor table with every segment's place and
  // size, tokenizer, KV profile): tells one bundle from another without reading the weights.
  uint64_t identity() const;
  size_t file_size() const { return size_; }
  bool is_mapped() const { return file_.is_mapped(); }
  // The mapping itself, for the model to choose its pages (MappedFile::use_large_pages()).
  MappedFile& file() { return file_; }
  const MappedFile& file() const { return file_; }
  uint32_t format_version() const { return format_version_; }
  // Reads every byte of the file and compares it with the checksum the converter recorded:
  // Ok when it matches or when none is recorded (`out->recorded` says which); CorruptFile
  // naming the damaged part (the header: config, tensor table, tokenizer, KV profile; or the
  // data area: the tensors' bytes) and the values otherwise; NotSupported for an algorithm
  // this reader does not know. open() never does this: it would read the whole file.
  Error verify_checksum(const char* label, BundleChecksum* out) const;

 private:
  MappedFile file_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  const schema::Bundle* root_ = nullptr;
  ModelConfig config_;
  uint32_t format_version_ = 0;
};

}  // namespace tern
