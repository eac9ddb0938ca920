#include "converter/import/bitllama2c_import.h"

#include <cmath>
#include <cstring>
#include <filesystem>

#include "converter/tokenizer/tokenizer_import.h"
#include "platform/file_map.h"
#include "runtime/model/tensor_names.h"

namespace tern::convert {
namespace {

class Reader {
 public:
  Reader(const uint8_t* data, size_t size, const std::string& path) : data_(data), size_(size), path_(path) {}
  Error take(uint64_t n, const uint8_t** out, const char* what) {
    if (n > size_ - pos_) {
      return fail(Error::Truncated, "%s: truncated reading %s: needs %llu bytes at offset %zu, file has %zu",
                  path_.c_str(), what, static_cast<unsigned long long>(n), pos_, size_);
    }
    *out = data_ + pos_;
    pos_ += n;
    return Error::Ok;
  }
  Error floats(uint64_t n, std::vector<float>* out, const char* what) {
    const uint8_t* p = nullptr;
    if (n > (size_ / 4) + 1) return take(n * 4, &p, what);  // report truncation without overflow
    TERN_RETURN_IF_ERROR(take(n * 4, &p, what));
    out->resize(n);
    std::memcpy(out->data(), p, n * 4);
    return Error::Ok;
  }
  size_t pos() const { return pos_; }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
};

int32_t read_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

namespace {

// The header: magic, version, the seven dimensions, the shared-classifier flag.
Result<ModelConfig> read_header(const uint8_t* data, size_t size, const char* p) {
  if (size < 4) return fail(Error::Truncated, "%s: %zu bytes, too short for a bitllama2c header", p, size);
  uint32_t magic;
  std::memcpy(&magic, data, 4);
  if (magic != kBitllama2cMagic) {
    return fail(Error::BadMagic, "%s: magic 0x%08x is not bitllama2c (0x%08x)", p, magic, kBitllama2cMagic);
  }
  if (size < kBitllama2cHeaderSize) {
    return fail(Error::Truncated, "%s: %zu bytes, the bitllama2c header alone is %zu", p, size, kBitllama2cHeaderSize);
  }
  const int32_t version = read_i32(data + 4);
  if (version != 1) return fail(Error::NotSupported, "%s: bitllama2c version %d (only 1 is known)", p, version);
  const char* names[] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "max_seq_len"};
  int32_t v[7];
  for (int i = 0; i < 7; ++i) {
    v[i] = read_i32(data + 8 + 4 * i);
    if (v[i] <= 0 || v[i] > (1 << 20)) {
      return fail(Error::CorruptFile, "%s: header %s = %d is out of range", p, names[i], v[i]);
    }
  }
  const uint32_t dim = v[0], hidden = v[1], layers = v[2], heads = v[3], kv_heads = v[4], vocab = v[5], ctx = v[6];
  if (dim % heads != 0 || heads % kv_heads != 0 || layers > 4096) {
    return fail(Error::CorruptFile, "%s: inconsistent header (dim %u, heads %u, kv heads %u, layers %u)", p, dim, heads,
                kv_heads, layers);
  }
  const uint8_t shared = data[36];
  if (shared > 1) return fail(Error::CorruptFile, "%s: shared_classifier flag is %u, not 0/1", p, shared);

  ModelConfig c;
  c.family = ModelFamily::Bitllama2c;
  c.hidden = dim;
  c.ffn_hidden = hidden;
  c.layers = layers;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.head_dim = dim / heads;
  c.vocab = vocab;
  c.max_context = ctx;
  c.rope_theta = 10000.0f;
  c.rope_style = RopeStyle::AdjacentPairs;
  c.norm_eps = 1e-5f;
  c.activation = Activation::Silu;
  c.has_sub_norms = false;
  c.tied_embeddings = shared == 1;
  c.bos_id = 1;
  c.eos_id = 2;
  return c;
}

// One ternary matrix: its float scale, then 2-bit codes, four to a byte, most significant first
// (0b00: 0, 0b01: +1, 0b11: -1; 0b10 is invalid).
Error read_ternary(Reader& r, const char* p, TensorIR* t) {
  const uint64_t n = t->shape[0] * t->shape[1];
  if (n % 4 != 0) {
    return fail(Error::CorruptFile, "%s: %s has %llu weights, not a multiple of 4", p, t->name.c_str(),
                static_cast<unsigned long long>(n));
  }
  const uint8_t* sp = nullptr;
  TERN_RETURN_IF_ERROR(r.take(4, &sp, t->name.c_str()));
  std::memcpy(&t->scale, sp, 4);
  if (!std::isfinite(t->scale)) {
    return fail(Error::CorruptFile, "%s: %s scale is not finite (offset %zu)", p, t->name.c_str(), r.pos() - 4);
  }
  const uint8_t* packed = nullptr;
  TERN_RETURN_IF_ERROR(r.take(n / 4, &packed, t->name.c_str()));
  t->codes.resize(n);
  for (uint64_t i = 0; i < n; ++i) {
    const unsigned bits = (packed[i / 4] >> (6 - 2 * (i % 4))) & 3u;
    if (bits == 2) {
      return fail(Error::CorruptFile, "%s: %s weight %llu has the invalid code 0b10", p, t->name.c_str(),
                  static_cast<unsigned long long>(i));
    }
    t->codes[i] = bits == 0 ? 0 : (bits == 1 ? 1 : -1);
  }
  return Error::Ok;
}

}  // namespace

Result<ModelIR> import_bitllama2c_bytes(const uint8_t* data, size_t size, const std::string& path) {
  const char* p = path.c_str();
  ModelIR ir;
  TERN_ASSIGN_OR_RETURN(ir.config, read_header(data, size, p));
  const ModelConfig& c = ir.config;
  const uint32_t dim = c.hidden, hidden = c.ffn_hidden, vocab = c.vocab;
  ir.source_format = "bitllama2c";
  ir.source_path = path;

  Reader r(data, size, path);
  const uint8_t* skip = nullptr;
  TERN_RETURN_IF_ERROR(r.take(kBitllama2cHeaderSize, &skip, "header"));
  TensorIR norm;
  norm.name = tensor_names::kFinalNorm;
  norm.shape = {dim};
  norm.source = path + ":norm";
  TERN_RETURN_IF_ERROR(r.floats(dim, &norm.values, "norm"));
  TensorIR emb;
  emb.name = tensor_names::kTokEmbeddings;
  emb.shape = {vocab, dim};
  emb.source = path + ":tok_embeddings";
  TERN_RETURN_IF_ERROR(r.floats(uint64_t{vocab} * dim, &emb.values, "tok_embeddings"));

  const uint32_t kv_dim = c.kv_heads * c.head_dim;
  const struct {
    const char* canon;
    uint32_t out, in;
  } kinds[] = {
      {tensor_names::kWq, dim, dim},     {tensor_names::kWk, kv_dim, dim},    {tensor_names::kWv, kv_dim, dim},
      {tensor_names::kWo, dim, dim},     {tensor_names::kWGate, hidden, dim}, {tensor_names::kWDown, dim, hidden},
      {tensor_names::kWUp, hidden, dim},
  };
  std::vector<TensorIR> mats;
  for (const auto& k : kinds) {
    for (uint32_t l = 0; l < c.layers; ++l) {
      TensorIR t;
      t.name = "layers." + std::to_string(l) + "." + k.canon;
      t.shape = {k.out, k.in};
      t.kind = TensorKind::Ternary;
      t.source = path + ":" + t.name;
      TERN_RETURN_IF_ERROR(read_ternary(r, p, &t));
      mats.push_back(std::move(t));
    }
  }
  if (!c.tied_embeddings) {
    TensorIR head;
    head.name = tensor_names::kLmHead;
    head.shape = {vocab, dim};
    head.source = path + ":classifier";
    TERN_RETURN_IF_ERROR(r.floats(uint64_t{vocab} * dim, &head.values, "classifier"));
    mats.push_back(std::move(head));
  }
  if (r.pos() != r.size()) {
    return fail(Error::CorruptFile, "%s: %zu unexpected trailing bytes after the last matrix (wrong header?)", p,
                r.size() - r.pos());
  }
  ir.tensors.push_back(std::move(emb));
  for (auto& t : mats) ir.tensors.push_back(std::move(t));
  ir.tensors.push_back(std::move(norm));
  return ir;
}

Result<ModelIR> import_bitllama2c(const std::string& path, const ConvertOptions& options) {
  TERN_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path.c_str()));
  TERN_ASSIGN_OR_RETURN(ModelIR ir, import_bitllama2c_bytes(file.data(), file.size(), path));
  namespace fs = std::filesystem;
  const std::string tok_path = options.tokenizer_path.empty()
                                   ? (fs::path(path).parent_path() / "tokenizer.model").string()
                                   : options.tokenizer_path;
  TERN_ASSIGN_OR_RETURN(const bool has_tokenizer, import_checkpoint_tokenizer(tok_path, options, path, &ir.tokenizer));
  if (has_tokenizer) {
    if (ir.tokenizer.bos_id >= 0) ir.config.bos_id = ir.tokenizer.bos_id;
    if (ir.tokenizer.eos_id >= 0) ir.config.eos_id = ir.tokenizer.eos_id;
  }
  return ir;
}

}  // namespace tern::convert
