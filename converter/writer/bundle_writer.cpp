#include "converter/writer/bundle_writer.h"

#include <flatbuffers/flatbuffers.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <set>

#include <unistd.h>

#include "converter/tokenizer/tokenizer_import.h"
#include "converter/writer/dense_quantize.h"
#include "runtime/base/version.h"
#include "runtime/base/xxh64.h"
#include "runtime/model/tensor_names.h"
#include "schema/bundle_generated.h"

namespace tern::convert {
namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

bool is_embedding(const std::string& name) {
  return name == tensor_names::kTokEmbeddings || name == tensor_names::kLmHead;
}

class FileSink : public SegmentSink {
 public:
  FileSink(std::FILE* f, const std::string& path, const ProgressFn& progress, uint64_t total)
      : f_(f), path_(path), progress_(progress), total_(total) {}
  Error write(const void* data, size_t size) override {
    if (size == 0) return Error::Ok;
    if (std::fwrite(data, 1, size, f_) != size) {
      return fail(Error::IoError, "%s: write failed after %llu bytes", path_.c_str(),
                  static_cast<unsigned long long>(written_));
    }
    if (hash_) hash_->update(data, size);
    written_ += size;
    segment_ += size;
    if (progress_ && (written_ - last_report_ > (8u << 20) || written_ == total_)) {
      last_report_ = written_;
      progress_("writing", written_, total_);
    }
    return Error::Ok;
  }
  Error write_zeros(uint64_t size) override {
    static const uint8_t zeros[4096] = {};
    if (size < (1u << 20)) {
      while (size > 0) {
        const uint64_t n = std::min<uint64_t>(size, sizeof(zeros));
        TERN_RETURN_IF_ERROR(write(zeros, n));
        size -= n;
      }
      return Error::Ok;
    }
    if (std::fflush(f_) != 0 || fseeko(f_, static_cast<off_t>(size), SEEK_CUR) != 0) {
      return fail(Error::IoError, "%s: seek failed: %s", path_.c_str(), std::strerror(errno));
    }
    if (hash_) hash_->update_zeros(size);
    written_ += size;
    segment_ += size;
    return Error::Ok;
  }
  Error pad_to(uint64_t absolute) {
    static const uint8_t zeros[kSegmentAlign] = {};
    while (position_base_ + written_ < absolute) {
      const uint64_t n = std::min<uint64_t>(absolute - position_base_ - written_, sizeof(zeros));
      TERN_RETURN_IF_ERROR(write(zeros, n));
    }
    return Error::Ok;
  }
  void set_base(uint64_t base) { position_base_ = base; }
  // Every byte written from now on (zeros of holes included) also goes into `hash`.
  void set_hash(Xxh64* hash) { hash_ = hash; }
  void begin_segment() { segment_ = 0; }
  uint64_t segment_written() const { return segment_; }

 private:
  std::FILE* f_;
  const std::string& path_;
  const ProgressFn& progress_;
  uint64_t total_;
  uint64_t written_ = 0;
  uint64_t segment_ = 0;
  uint64_t last_report_ = 0;
  uint64_t position_base_ = 0;
  Xxh64* hash_ = nullptr;
};

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

struct Planned {
  uint64_t data_offset = 0, data_size = 0;
  uint64_t scales_offset = 0, scales_size = 0;
};

}  // namespace

uint64_t TensorSpec::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}
uint64_t TensorSpec::cols() const { return shape.empty() ? 0 : shape.back(); }
uint64_t TensorSpec::rows() const { return cols() == 0 ? 0 : elements() / cols(); }
uint64_t TensorSpec::data_size() const {
  if (type == TensorType::Ternary) return ternary_packed_size(layout, rows(), cols());
  return dense_data_size(dense_type, rows(), cols());
}
uint64_t TensorSpec::scale_count() const {
  if (type == TensorType::Ternary) return 0;
  return dense_scale_count(dense_type, rows(), cols(), group);
}

std::string describe_options(const ConvertOptions& o) {
  std::string s = std::string("embed=") + to_string(o.embed_type);
  if (o.embed_type == DenseType::Q8 || o.embed_type == DenseType::Q4) s += " group=" + std::to_string(o.embed_group);
  s += std::string(" layout=") + to_string(o.ternary_layout);
  return s;
}

Error write_dense_rows(DenseType type, uint32_t group, const float* values, uint64_t rows, uint64_t cols,
                       SegmentSink& sink, std::vector<float>& scales) {
  const uint64_t n = rows * cols;
  switch (type) {
    case DenseType::F32: return sink.write(values, n * sizeof(float));
    case DenseType::F16:
    case DenseType::BF16: {
      std::vector<uint16_t> buf(std::min<uint64_t>(n, 1u << 16));
      for (uint64_t i = 0; i < n; i += buf.size()) {
        const uint64_t m = std::min<uint64_t>(buf.size(), n - i);
        for (uint64_t j = 0; j < m; ++j) {
          buf[j] = type == DenseType::F16 ? f32_to_f16(values[i + j]) : f32_to_bf16(values[i + j]);
        }
        TERN_RETURN_IF_ERROR(sink.write(buf.data(), m * sizeof(uint16_t)));
      }
      return Error::Ok;
    }
    case DenseType::Q8:
    case DenseType::Q4: {
      const uint64_t per_row_scales = dense_scale_count(type, 1, cols, group);
      const uint64_t row_bytes = dense_data_size(type, 1, cols);
      const uint64_t chunk_rows = std::max<uint64_t>(1, (1u << 20) / std::max<uint64_t>(cols, 1));
      std::vector<uint8_t> q(chunk_rows * row_bytes);
      std::vector<float> s(chunk_rows * per_row_scales);
      for (uint64_t r = 0; r < rows; r += chunk_rows) {
        const uint64_t m = std::min(chunk_rows, rows - r);
        if (type == DenseType::Q8) {
          quantize_dense_q8(values + r * cols, m, cols, group, reinterpret_cast<int8_t*>(q.data()), s.data());
        } else {
          quantize_dense_q4(values + r * cols, m, cols, group, q.data(), s.data());
        }
        TERN_RETURN_IF_ERROR(sink.write(q.data(), m * row_bytes));
        scales.insert(scales.end(), s.begin(), s.begin() + static_cast<ptrdiff_t>(m * per_row_scales));
      }
      return Error::Ok;
    }
  }
  return fail(Error::UnsupportedType, "dense type %u not supported", static_cast<unsigned>(type));
}

BundleContents contents_from_ir(const ModelIR& ir, const ConvertOptions& options) {
  BundleContents c;
  c.config = ir.config;
  if (!ir.tokenizer.pieces.empty()) c.tokenizer = ir.tokenizer;
  c.source_format = ir.source_format;
  c.source_path = ir.source_path;
  c.options = describe_options(options);
  c.embedding = ir.embedding;
  for (const TensorIR& t : ir.tensors) {
    TensorSpec s;
    s.name = t.name;
    s.shape = t.shape;
    const TensorIR* tp = &t;
    if (t.kind == TensorKind::Ternary) {
      s.type = TensorType::Ternary;
      s.layout = options.ternary_layout;
      s.scale = t.scale;
      const TernaryLayout layout = s.layout;
      s.produce = [tp, layout](SegmentSink& sink, std::vector<float>&) -> Error {
        const uint64_t cols = tp->shape.back(), rows = tp->elements() / cols;
        if (tp->codes.size() != rows * cols) {
          return fail(Error::Internal, "tensor %s holds %zu codes for shape %llu x %llu", tp->name.c_str(),
                      tp->codes.size(), static_cast<unsigned long long>(rows), static_cast<unsigned long long>(cols));
        }
        std::vector<uint8_t> packed(ternary_packed_size(layout, rows, cols));
        TERN_RETURN_IF_ERROR(ternary_pack(layout, tp->codes.data(), rows, cols, packed.data(), packed.size()));
        return sink.write(packed.data(), packed.size());
      };
    } else {
      s.type = TensorType::Dense;
      s.dense_type = is_embedding(t.name) ? options.embed_type : DenseType::F32;
      if (s.dense_type == DenseType::Q8 || s.dense_type == DenseType::Q4) s.group = options.embed_group;
      const DenseType type = s.dense_type;
      const uint32_t group = s.group;
      s.produce = [tp, type, group](SegmentSink& sink, std::vector<float>& scales) -> Error {
        const uint64_t cols = tp->shape.back(), rows = tp->elements() / cols;
        if (tp->values.size() != rows * cols) {
          return fail(Error::Internal, "tensor %s holds %zu values for %llu elements", tp->name.c_str(),
                      tp->values.size(), static_cast<unsigned long long>(rows * cols));
        }
        return write_dense_rows(type, group, tp->values.data(), rows, cols, sink, scales);
      };
    }
    c.tensors.push_back(std::move(s));
  }
  return c;
}

namespace {

// The data area: each segment 64-byte aligned, in the order given; checks every tensor's shape.
Result<uint64_t> plan_segments(const std::string& path, const BundleContents& contents, std::vector<Planned>* plan) {
  plan->assign(contents.tensors.size(), Planned{});
  std::set<std::string> names;
  uint64_t cursor = 0;
  for (size_t i = 0; i < contents.tensors.size(); ++i) {
    const TensorSpec& t = contents.tensors[i];
    if (!names.insert(t.name).second)
      return fail(Error::InvalidArgument, "%s: duplicate tensor '%s'", path.c_str(), t.name.c_str());
    if (t.shape.empty() || t.shape.size() > 4 || t.elements() == 0) {
      return fail(Error::ShapeMismatch, "%s: tensor '%s' has an invalid shape", path.c_str(), t.name.c_str());
    }
    if (t.type == TensorType::Ternary && t.shape.size() != 2) {
      return fail(Error::ShapeMismatch, "%s: ternary tensor '%s' must be 2-D", path.c_str(), t.name.c_str());
    }
    if ((t.dense_type == DenseType::Q8 || t.dense_type == DenseType::Q4) && t.type == TensorType::Dense &&
        (t.group == 0 || (t.dense_type == DenseType::Q4 && t.group % 2) || t.group > t.cols())) {
      return fail(Error::InvalidArgument, "%s: tensor '%s' group size %u invalid for %llu columns", path.c_str(),
                  t.name.c_str(), t.group, static_cast<unsigned long long>(t.cols()));
    }
    Planned& p = (*plan)[i];
    p.data_offset = cursor;
    p.data_size = t.data_size();
    cursor = align_up(cursor + p.data_size, kSegmentAlign);
    p.scales_size = t.scale_count() * sizeof(float);
    if (p.scales_size) {
      p.scales_offset = cursor;
      cursor = align_up(cursor + p.scales_size, kSegmentAlign);
    }
  }
  return cursor;
}

flatbuffers::Offset<schema::ModelConfig> write_config(flatbuffers::FlatBufferBuilder& fbb,
                                                      const BundleContents& contents) {
  const ModelConfig& cfg = contents.config;
  const std::string chat = contents.tokenizer ? contents.tokenizer->chat_template : std::string();
  auto chat_off = fbb.CreateString(chat);
  flatbuffers::Offset<flatbuffers::Vector<uint8_t>> sliding_off;
  if (cfg.sliding_layers != 0) {
    std::vector<uint8_t> sliding(cfg.layers);
    for (uint32_t l = 0; l < cfg.layers; ++l) sliding[l] = layer_is_sliding(cfg, l) ? 1 : 0;
    sliding_off = fbb.CreateVector(sliding);
  }
  flatbuffers::Offset<schema::Embedding> embedding_off;
  if (cfg.embedding) {
    std::vector<flatbuffers::Offset<schema::EmbeddingPrompt>> prompts;
    for (const auto& [name, text] : contents.embedding.prompts) {
      prompts.push_back(schema::CreateEmbeddingPromptDirect(fbb, name.c_str(), text.c_str()));
    }
    embedding_off = schema::CreateEmbeddingDirect(fbb, static_cast<schema::Pooling>(cfg.pooling),
                                                  cfg.embedding_normalize, cfg.hidden, &prompts,
                                                  contents.embedding.default_prompt.c_str(), cfg.embedding_append_eos);
  }
  schema::ModelConfigBuilder cb(fbb);
  cb.add_family(static_cast<schema::ModelFamily>(cfg.family));
  cb.add_hidden(cfg.hidden);
  cb.add_ffn_hidden(cfg.ffn_hidden);
  cb.add_layers(cfg.layers);
  cb.add_heads(cfg.heads);
  cb.add_kv_heads(cfg.kv_heads);
  cb.add_head_dim(cfg.head_dim);
  cb.add_vocab(cfg.vocab);
  cb.add_max_context(cfg.max_context);
  cb.add_rope_theta(cfg.rope_theta);
  cb.add_rope_style(static_cast<schema::RopeStyle>(cfg.rope_style));
  cb.add_norm_eps(cfg.norm_eps);
  cb.add_activation(static_cast<schema::Activation>(cfg.activation));
  cb.add_has_sub_norms(cfg.has_sub_norms);
  cb.add_tied_embeddings(cfg.tied_embeddings);
  cb.add_bos_id(cfg.bos_id);
  cb.add_eos_id(cfg.eos_id);
  cb.add_eot_id(cfg.eot_id);
  cb.add_chat_template(chat_off);
  cb.add_embedding_scale(cfg.embedding_scale);
  cb.add_attention_scale(cfg.attention_scale);
  cb.add_rope_local_theta(cfg.rope_local_theta);
  cb.add_sliding_window(cfg.sliding_window);
  if (cfg.sliding_layers != 0) cb.add_sliding_layers(sliding_off);
  if (cfg.embedding) cb.add_embedding(embedding_off);
  return cb.Finish();
}

flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<schema::Tensor>>> write_tensor_table(
    flatbuffers::FlatBufferBuilder& fbb, const BundleContents& contents, const std::vector<Planned>& plan) {
  std::vector<flatbuffers::Offset<schema::Tensor>> tensor_offs;
  for (size_t i = 0; i < contents.tensors.size(); ++i) {
    const TensorSpec& t = contents.tensors[i];
    auto name = fbb.CreateString(t.name);
    auto shape = fbb.CreateVector(t.shape);
    const schema::Segment data_seg(plan[i].data_offset, plan[i].data_size);
    const schema::Segment scale_seg(plan[i].scales_offset, plan[i].scales_size);
    schema::TensorBuilder tb(fbb);
    tb.add_name(name);
    tb.add_type(t.type == TensorType::Ternary ? schema::TensorType::Ternary : schema::TensorType::Dense);
    tb.add_dense_type(static_cast<uint32_t>(t.dense_type));
    tb.add_ternary_layout(static_cast<uint32_t>(t.layout));
    tb.add_shape(shape);
    tb.add_scale(t.scale);
    tb.add_data(&data_seg);
    tb.add_group_size(t.group);
    if (plan[i].scales_size) tb.add_group_scales(&scale_seg);
    tensor_offs.push_back(tb.Finish());
  }
  return fbb.CreateVectorOfSortedTables(&tensor_offs);
}

flatbuffers::Offset<schema::KvProfile> write_kv_profile(flatbuffers::FlatBufferBuilder& fbb, const KvProfileIR& kv) {
  std::vector<flatbuffers::Offset<schema::KvHeadProfile>> heads;
  for (const auto& h : kv.heads) {
    heads.push_back(schema::CreateKvHeadProfileDirect(
        fbb, h.layer, h.kv_head, h.shannon_entropy, h.renyi2_entropy, static_cast<schema::KvClass>(h.kv_class),
        h.key_bits, h.value_bits, h.sink, h.sensitivity.empty() ? nullptr : &h.sensitivity,
        h.query_shannon_entropy.empty() ? nullptr : &h.query_shannon_entropy));
  }
  std::vector<flatbuffers::Offset<schema::KvAllocation>> allocations;
  for (const auto& a : kv.allocations) {
    allocations.push_back(
        schema::CreateKvAllocationDirect(fbb, a.average_bits, &a.key_bits, &a.value_bits, a.rule.c_str()));
  }
  return schema::CreateKvProfileDirect(
      fbb, &heads, kv.sink_tokens, kv.recent_window, kv.group_size, kv.average_bits, kv.provenance.c_str(),
      kv.sensitivity_widths.empty() ? nullptr : &kv.sensitivity_widths, kv.sensitivity_tokens,
      allocations.empty() ? nullptr : &allocations, kv.value_group);
}

// The FlatBuffer header: config, provenance, the tensor table with every segment's place,
// the tokenizer and the KV profile.
void write_header(flatbuffers::FlatBufferBuilder& fbb, const BundleContents& contents, const std::vector<Planned>& plan,
                  uint64_t data_size) {
  auto config_off = write_config(fbb, contents);
  auto prov_off = schema::CreateProvenanceDirect(fbb, contents.source_format.c_str(), contents.source_path.c_str(),
                                                 version_string(), utc_now().c_str(), contents.options.c_str());
  auto tensors_off = write_tensor_table(fbb, contents, plan);
  flatbuffers::Offset<schema::Tokenizer> tok_off;
  if (contents.tokenizer) {
    tok_off = write_tokenizer(fbb, *contents.tokenizer);
  } else {
    schema::TokenizerBuilder tb(fbb);
    tok_off = tb.Finish();
  }
  flatbuffers::Offset<schema::KvProfile> kv_off;
  if (contents.kv_profile) kv_off = write_kv_profile(fbb, *contents.kv_profile);
  // The checksum's values are zero placeholders (forced into the buffer, zero being their
  // default), filled in once the data area is written (patch_checksum).
  flatbuffers::Offset<schema::Checksum> checksum_off;
  if (contents.checksum) {
    fbb.ForceDefaults(true);
    checksum_off = schema::CreateChecksum(fbb, schema::ChecksumAlgorithm::Xxh64, 0, 0);
    fbb.ForceDefaults(false);
  }

  schema::BundleBuilder bb(fbb);
  bb.add_format_version(kBundleFormatVersion);
  bb.add_config(config_off);
  bb.add_provenance(prov_off);
  bb.add_tensors(tensors_off);
  bb.add_tokenizer(tok_off);
  if (contents.kv_profile) bb.add_kv_profile(kv_off);
  bb.add_data_size(data_size);
  if (checksum_off.o != 0) bb.add_checksum(checksum_off);
  fbb.FinishSizePrefixed(bb.Finish(), schema::BundleIdentifier());
}

// The header's checksum values from the data area's hash: the header's own hash covers its
// bytes up to the data area with both values still zero, then both are written into `buf`.
void patch_checksum(uint8_t* buf, uint64_t header, uint64_t data_start, uint64_t data_hash, WriteStats* stats) {
  const schema::Checksum* cs = flatbuffers::GetSizePrefixedRoot<schema::Bundle>(buf)->checksum();
  if (cs == nullptr) return;
  Xxh64 h;
  h.update(buf, header);
  h.update_zeros(data_start - header);
  stats->checksum_header = h.digest();
  stats->checksum_data = data_hash;
  const auto* table = reinterpret_cast<const flatbuffers::Table*>(cs);
  const uint8_t* header_field = table->GetAddressOf(schema::Checksum::VT_HEADER);
  const uint8_t* data_field = table->GetAddressOf(schema::Checksum::VT_DATA);
  flatbuffers::WriteScalar(buf + (header_field - buf), stats->checksum_header);
  flatbuffers::WriteScalar(buf + (data_field - buf), stats->checksum_data);
}

// Streams tensor i's data (and group scales) to its planned place, checking what its producer
// wrote against the plan.
Error write_tensor_data(const std::string& path, const TensorSpec& t, const Planned& plan, uint64_t data_start,
                        FileSink& sink, std::vector<float>& scales) {
  TERN_RETURN_IF_ERROR(sink.pad_to(data_start + plan.data_offset));
  scales.clear();
  sink.begin_segment();
  if (!t.produce) return fail(Error::Internal, "%s: tensor '%s' has no producer", path.c_str(), t.name.c_str());
  TERN_RETURN_IF_ERROR(t.produce(sink, scales));
  if (sink.segment_written() != plan.data_size) {
    return fail(Error::Internal, "%s: tensor '%s' produced %llu bytes, expected %llu", path.c_str(), t.name.c_str(),
                static_cast<unsigned long long>(sink.segment_written()),
                static_cast<unsigned long long>(plan.data_size));
  }
  if (scales.size() * sizeof(float) != plan.scales_size) {
    return fail(Error::Internal, "%s: tensor '%s' produced %zu group scales, expected %llu", path.c_str(),
                t.name.c_str(), scales.size(), static_cast<unsigned long long>(plan.scales_size / 4));
  }
  if (!scales.empty()) {
    TERN_RETURN_IF_ERROR(sink.pad_to(data_start + plan.scales_offset));
    TERN_RETURN_IF_ERROR(sink.write(scales.data(), scales.size() * sizeof(float)));
  }
  return Error::Ok;
}

}  // namespace

Result<WriteStats> write_bundle(const std::string& path, const BundleContents& contents, const ProgressFn& progress) {
  const auto start = std::chrono::steady_clock::now();
  WriteStats stats;
  std::vector<Planned> plan;
  TERN_ASSIGN_OR_RETURN(const uint64_t data_size, plan_segments(path, contents, &plan));
  flatbuffers::FlatBufferBuilder fbb(1 << 16);
  write_header(fbb, contents, plan, data_size);
  const uint64_t header = fbb.GetSize();
  const uint64_t data_start = align_up(header, kSegmentAlign);
  const uint64_t total = data_start + data_size;

  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return fail(Error::IoError, "%s: cannot open for writing: %s", path.c_str(), std::strerror(errno));
  FileSink sink(f.get(), path, progress, total);
  TERN_RETURN_IF_ERROR(sink.write(fbb.GetBufferPointer(), header));
  TERN_RETURN_IF_ERROR(sink.pad_to(data_start));
  Xxh64 data_hash;
  sink.set_hash(&data_hash);

  std::vector<float> scales;
  for (size_t i = 0; i < contents.tensors.size(); ++i) {
    const TensorSpec& t = contents.tensors[i];
    TERN_RETURN_IF_ERROR(write_tensor_data(path, t, plan[i], data_start, sink, scales));
    const uint64_t bytes = plan[i].data_size + plan[i].scales_size;
    if (t.type == TensorType::Ternary) {
      stats.ternary_bytes += bytes;
      stats.ternary_weights += t.elements();
    } else if (is_embedding(t.name)) {
      stats.embedding_bytes += bytes;
    } else {
      stats.other_dense_bytes += bytes;
    }
  }
  TERN_RETURN_IF_ERROR(sink.pad_to(total));
  if (std::fflush(f.get()) != 0)
    return fail(Error::IoError, "%s: flush failed: %s", path.c_str(), std::strerror(errno));
  // A trailing hole from write_zeros is only a seek: give the file its full length.
  if (ftruncate(fileno(f.get()), static_cast<off_t>(total)) != 0) {
    return fail(Error::IoError, "%s: cannot set the file size: %s", path.c_str(), std::strerror(errno));
  }
  patch_checksum(fbb.GetBufferPointer(), header, data_start, data_hash.digest(), &stats);
  if (contents.checksum &&
      (fseeko(f.get(), 0, SEEK_SET) != 0 || std::fwrite(fbb.GetBufferPointer(), 1, header, f.get()) != header)) {
    return fail(Error::IoError, "%s: cannot write the checksum: %s", path.c_str(), std::strerror(errno));
  }
  if (std::fclose(f.release()) != 0) return fail(Error::IoError, "%s: close failed", path.c_str());

  stats.tensors = contents.tensors.size();
  stats.file_size = total;
  stats.header_size = header;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace tern::convert
