#include "runtime/model/bundle.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include "runtime/base/hash.h"
#include "runtime/base/xxh64.h"
#include "runtime/model/model_family.h"
#include "schema/bundle_generated.h"

namespace tern {
namespace {

constexpr uint32_t kFormatVersion = 1;
constexpr uint64_t kSegmentAlign = 64;
constexpr uint32_t kMaxLayers = 4096;
constexpr uint32_t kMaxDim = 1u << 20;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// a * b, or false on overflow.
bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > UINT64_MAX / a) return false;
  *out = a * b;
  return true;
}

struct Ctx {
  const char* label;
  uint64_t data_start;
  uint64_t data_size;
};

// A segment must lie inside the data area and start on the segment alignment.
Error check_segment(const Ctx& ctx, const char* tensor, const char* what, const schema::Segment* seg,
                    uint64_t expected_size) {
  if (seg == nullptr) return fail(Error::InvalidBundle, "%s: tensor '%s' has no %s segment", ctx.label, tensor, what);
  const uint64_t off = seg->offset();
  const uint64_t size = seg->size();
  if (off % kSegmentAlign != 0) {
    return fail(Error::InvalidBundle, "%s: tensor '%s' %s offset %llu is not %llu-byte aligned", ctx.label, tensor,
                what, static_cast<unsigned long long>(off), static_cast<unsigned long long>(kSegmentAlign));
  }
  if (size != expected_size) {
    return fail(Error::ShapeMismatch, "%s: tensor '%s' %s holds %llu bytes, its shape needs %llu", ctx.label, tensor,
                what, static_cast<unsigned long long>(size), static_cast<unsigned long long>(expected_size));
  }
  if (off > ctx.data_size || size > ctx.data_size - off) {
    return fail(Error::Truncated, "%s: tensor '%s' %s [%llu, +%llu) runs past the data area (%llu bytes)", ctx.label,
                tensor, what, static_cast<unsigned long long>(off), static_cast<unsigned long long>(size),
                static_cast<unsigned long long>(ctx.data_size));
  }
  return Error::Ok;
}

Error check_tensor(const Ctx& ctx, const schema::Tensor* t) {
  const char* name = t->name()->c_str();
  const auto* shape = t->shape();
  if (shape == nullptr || shape->size() == 0 || shape->size() > 4) {
    return fail(Error::InvalidBundle, "%s: tensor '%s' has %u dimensions (1 to 4 allowed)", ctx.label, name,
                shape ? shape->size() : 0u);
  }
  // The verifier only checks the 4-byte length prefix; uint64 elements need 8.
  if (reinterpret_cast<uintptr_t>(shape->Data()) % alignof(uint64_t) != 0) {
    return fail(Error::InvalidBundle, "%s: tensor '%s' shape vector is misaligned (corrupt bundle)", ctx.label, name);
  }
  uint64_t elements = 1;
  for (uint32_t i = 0; i < shape->size(); ++i) {
    const uint64_t d = shape->Get(i);
    if (d == 0 || d > (1ull << 40) || !checked_mul(elements, d, &elements)) {
      return fail(Error::ShapeMismatch, "%s: tensor '%s' dimension %u is %llu", ctx.label, name, i,
                  static_cast<unsigned long long>(d));
    }
  }
  if (elements > (1ull << 40)) return fail(Error::ShapeMismatch, "%s: tensor '%s' is too large", ctx.label, name);
  const uint64_t cols = shape->Get(shape->size() - 1);
  const uint64_t rows = elements / cols;
  switch (t->type()) {
    case schema::TensorType::Ternary: {
      if (shape->size() != 2) {
        return fail(Error::ShapeMismatch, "%s: ternary tensor '%s' must be 2-D, has %u dimensions", ctx.label, name,
                    shape->size());
      }
      if (!is_known_layout(t->ternary_layout())) {
        return fail(Error::UnsupportedType, "%s: tensor '%s' has unknown ternary layout id %u", ctx.label, name,
                    t->ternary_layout());
      }
      if (!std::isfinite(t->scale())) {
        return fail(Error::InvalidBundle, "%s: ternary tensor '%s' has a non-finite scale", ctx.label, name);
      }
      const size_t need = ternary_packed_size(static_cast<TernaryLayout>(t->ternary_layout()), rows, cols);
      if (need == 0) return fail(Error::ShapeMismatch, "%s: tensor '%s' is too large", ctx.label, name);
      return check_segment(ctx, name, "data", t->data(), need);
    }
    case schema::TensorType::Dense: {
      const uint32_t dt = t->dense_type();
      if (dt > static_cast<uint32_t>(DenseType::Q4)) {
        return fail(Error::UnsupportedType, "%s: tensor '%s' has unknown dense type %u", ctx.label, name, dt);
      }
      const DenseType type = static_cast<DenseType>(dt);
      TERN_RETURN_IF_ERROR(check_segment(ctx, name, "data", t->data(), dense_data_size(type, rows, cols)));
      if (type == DenseType::Q8 || type == DenseType::Q4) {
        const uint32_t g = t->group_size();
        if (g == 0 || g > cols || (type == DenseType::Q4 && g % 2 != 0)) {
          return fail(Error::InvalidBundle, "%s: tensor '%s' has invalid group size %u for %llu columns", ctx.label,
                      name, g, static_cast<unsigned long long>(cols));
        }
        const uint64_t scales = dense_scale_count(type, rows, cols, g);
        return check_segment(ctx, name, "group scales", t->group_scales(), scales * sizeof(float));
      }
      return Error::Ok;
    }
  }
  return fail(Error::UnsupportedType, "%s: tensor '%s' has unknown tensor type %u", ctx.label, name,
              static_cast<unsigned>(t->type()));
}

ModelConfig to_config(const schema::ModelConfig* c);

Error check_config(const Ctx& ctx, const schema::ModelConfig* c) {
  if (family_traits(static_cast<ModelFamily>(c->family())) == nullptr) {
    return fail(Error::UnsupportedModel, "%s: unknown model family %u", ctx.label, static_cast<unsigned>(c->family()));
  }
  if (static_cast<uint32_t>(c->activation()) > static_cast<uint32_t>(schema::Activation::MAX)) {
    return fail(Error::UnsupportedModel, "%s: unknown activation %u", ctx.label,
                static_cast<unsigned>(c->activation()));
  }
  if (static_cast<uint32_t>(c->rope_style()) > static_cast<uint32_t>(schema::RopeStyle::MAX)) {
    return fail(Error::UnsupportedModel, "%s: unknown rope style %u", ctx.label,
                static_cast<unsigned>(c->rope_style()));
  }
  const struct {
    const char* name;
    uint32_t value;
    uint32_t max;
  } dims[] = {{"hidden", c->hidden(), kMaxDim},    {"ffn_hidden", c->ffn_hidden(), kMaxDim},
              {"layers", c->layers(), kMaxLayers}, {"heads", c->heads(), 4096},
              {"kv_heads", c->kv_heads(), 4096},   {"head_dim", c->head_dim(), 4096},
              {"vocab", c->vocab(), 1u << 24},     {"max_context", c->max_context(), 1u << 24}};
  for (const auto& d : dims) {
    if (d.value == 0 || d.value > d.max) {
      return fail(Error::InvalidBundle, "%s: config %s = %u is out of range (1..%u)", ctx.label, d.name, d.value,
                  d.max);
    }
  }
  if (c->heads() % c->kv_heads() != 0) {
    return fail(Error::InvalidBundle, "%s: config heads %u is not a multiple of kv_heads %u", ctx.label, c->heads(),
                c->kv_heads());
  }
  const int32_t ids[] = {c->bos_id(), c->eos_id(), c->eot_id()};
  for (int32_t id : ids) {
    if (id < -1 || id >= static_cast<int64_t>(c->vocab())) {
      return fail(Error::InvalidBundle, "%s: config special token id %d outside the vocab (%u)", ctx.label, id,
                  c->vocab());
    }
  }
  if (!(c->norm_eps() >= 0.0f && c->norm_eps() < 1.0f) || !(c->rope_theta() > 0.0f)) {
    return fail(Error::InvalidBundle, "%s: config norm_eps %g / rope_theta %g out of range", ctx.label,
                static_cast<double>(c->norm_eps()), static_cast<double>(c->rope_theta()));
  }
  if (const auto* sliding = c->sliding_layers()) {
    if (sliding->size() > c->layers()) {
      return fail(Error::InvalidBundle, "%s: config sliding_layers has %u entries for %u layers", ctx.label,
                  sliding->size(), c->layers());
    }
    for (uint32_t l = 64; l < sliding->size(); ++l) {
      if (sliding->Get(l)) {
        return fail(Error::UnsupportedModel, "%s: sliding-window layer %u: only the first 64 layers may slide",
                    ctx.label, l);
      }
    }
  }
  if (const schema::Embedding* e = c->embedding()) {
    if (static_cast<uint32_t>(e->pooling()) > static_cast<uint32_t>(schema::Pooling::MAX)) {
      return fail(Error::UnsupportedModel, "%s: unknown pooling %u", ctx.label, static_cast<unsigned>(e->pooling()));
    }
    if (e->dimensions() != c->hidden()) {
      return fail(Error::InvalidBundle, "%s: embedding dimensions %u differ from the hidden size %u", ctx.label,
                  e->dimensions(), c->hidden());
    }
  }
  // The ranges of the remaining fields, as for a config built in memory.
  if (const Error e = validate_config(to_config(c)); e != Error::Ok) {
    char message[512];
    std::snprintf(message, sizeof message, "%s", last_error_message());
    return fail(e, "%s: %s", ctx.label, message);
  }
  return Error::Ok;
}

Error check_shape(const Ctx& ctx, const schema::Tensor* t, uint64_t d0, uint64_t d1) {
  const auto* s = t->shape();
  const bool ok =
      d1 == 0 ? (s->size() == 1 && s->Get(0) == d0) : (s->size() == 2 && s->Get(0) == d0 && s->Get(1) == d1);
  if (!ok) {
    return fail(Error::ShapeMismatch, "%s: tensor '%s' has shape [%llu%s%llu], the config needs [%llu%s%llu]",
                ctx.label, t->name()->c_str(), static_cast<unsigned long long>(s->Get(0)), s->size() > 1 ? ", " : "",
                static_cast<unsigned long long>(s->size() > 1 ? s->Get(1) : 0), static_cast<unsigned long long>(d0),
                d1 ? ", " : "", static_cast<unsigned long long>(d1));
  }
  return Error::Ok;
}

// Shapes against the config; the tensors the family's table requires must be present.
Error check_model_tensors(const Ctx& ctx, const ModelConfig& c,
                          const flatbuffers::Vector<flatbuffers::Offset<schema::Tensor>>* tensors) {
  auto check = [&](const WeightSpec& spec, const char* name) -> Error {
    const schema::Tensor* t = tensors->LookupByKey(name);
    if (t == nullptr) {
      if (tensor_required(spec, c))
        return fail(Error::UnknownTensor, "%s: required tensor '%s' is missing", ctx.label, name);
      return Error::Ok;
    }
    if ((t->type() == schema::TensorType::Ternary) != spec.ternary) {
      return fail(Error::UnsupportedType, "%s: tensor '%s' must be %s", ctx.label, name,
                  spec.ternary ? "ternary" : "dense");
    }
    return check_shape(ctx, t, tensor_dim(spec.rows, c), tensor_dim(spec.cols, c));
  };
  for (size_t i = 0; i < kGlobalTensorCount; ++i) {
    TERN_RETURN_IF_ERROR(check(kGlobalTensors[i], kGlobalTensors[i].name));
  }
  char name[96];
  for (uint32_t l = 0; l < c.layers; ++l) {
    for (size_t i = 0; i < kLayerTensorCount; ++i) {
      if (!layer_tensor_name(kLayerTensors[i], l, name, sizeof name)) return fail(Error::Internal, "tensor name");
      TERN_RETURN_IF_ERROR(check(kLayerTensors[i], name));
    }
  }
  return Error::Ok;
}

Error check_tokenizer(const Ctx& ctx, const schema::Tokenizer* tok) {
  const auto* offsets = tok->piece_offsets();
  const auto* bytes = tok->piece_bytes();
  const uint32_t n_bytes = bytes ? bytes->size() : 0;
  if (offsets == nullptr || offsets->size() == 0) {
    if (bytes != nullptr && bytes->size() != 0) {
      return fail(Error::InvalidBundle, "%s: tokenizer has piece bytes but no offsets", ctx.label);
    }
    return Error::Ok;  // empty tokenizer (format tests); the runtime refuses to run it
  }
  if (static_cast<uint32_t>(tok->type()) > static_cast<uint32_t>(schema::TokenizerType::MAX) ||
      static_cast<uint32_t>(tok->pretokenizer()) > static_cast<uint32_t>(schema::PreTokenizer::MAX)) {
    return fail(Error::InvalidBundle, "%s: unknown tokenizer type %u or pre-tokenizer %u", ctx.label,
                static_cast<unsigned>(tok->type()), static_cast<unsigned>(tok->pretokenizer()));
  }
  uint32_t prev = 0;
  for (uint32_t i = 0; i < offsets->size(); ++i) {
    const uint32_t o = offsets->Get(i);
    if (o < prev || o > n_bytes || (i == 0 && o != 0)) {
      return fail(Error::InvalidBundle, "%s: tokenizer piece offset %u (= %u) is out of order or past %u bytes",
                  ctx.label, i, o, n_bytes);
    }
    prev = o;
  }
  const uint32_t pieces = offsets->size() - 1;
  if (tok->attrs() && tok->attrs()->size() != 0 && tok->attrs()->size() != pieces) {
    return fail(Error::InvalidBundle, "%s: tokenizer has %u attrs for %u pieces", ctx.label, tok->attrs()->size(),
                pieces);
  }
  if (const auto* attrs = tok->attrs()) {
    for (uint32_t i = 0; i < attrs->size(); ++i) {
      if (attrs->Get(i) > static_cast<uint8_t>(schema::TokenAttr::MAX)) {
        return fail(Error::InvalidBundle, "%s: tokenizer piece %u has unknown attribute %u", ctx.label, i,
                    attrs->Get(i));
      }
    }
  }
  if (tok->scores() && tok->scores()->size() != 0 && tok->scores()->size() != pieces) {
    return fail(Error::InvalidBundle, "%s: tokenizer has %u scores for %u pieces", ctx.label, tok->scores()->size(),
                pieces);
  }
  if (const auto* merges = tok->merges()) {
    if (merges->size() % 2 != 0) return fail(Error::InvalidBundle, "%s: tokenizer merges are not pairs", ctx.label);
    for (uint32_t i = 0; i < merges->size(); ++i) {
      if (merges->Get(i) >= pieces) {
        return fail(Error::InvalidBundle, "%s: tokenizer merge %u names token %u of %u", ctx.label, i / 2,
                    merges->Get(i), pieces);
      }
    }
  }
  const int32_t ids[] = {tok->bos_id(), tok->eos_id(), tok->eot_id(), tok->unk_id(), tok->pad_id()};
  for (int32_t id : ids) {
    if (id < -1 || id >= static_cast<int64_t>(pieces)) {
      return fail(Error::InvalidBundle, "%s: tokenizer special id %d outside %u pieces", ctx.label, id, pieces);
    }
  }
  return Error::Ok;
}

Error check_kv_profile(const Ctx& ctx, const schema::ModelConfig* c, const schema::KvProfile* kv) {
  if (kv == nullptr) return Error::Ok;
  if (const auto* heads = kv->heads()) {
    for (uint32_t i = 0; i < heads->size(); ++i) {
      const auto* h = heads->Get(i);
      if (h->layer() >= c->layers() || h->kv_head() >= c->kv_heads() || h->key_bits() > 16 || h->value_bits() > 16 ||
          static_cast<uint32_t>(h->class_()) > static_cast<uint32_t>(schema::KvClass::MAX)) {
        return fail(Error::InvalidBundle, "%s: KV profile entry %u (layer %u, kv head %u, bits %u/%u) is invalid",
                    ctx.label, i, h->layer(), h->kv_head(), h->key_bits(), h->value_bits());
      }
    }
  }
  return Error::Ok;
}

}  // namespace

TernaryMatrix TensorView::as_ternary() const {
  TernaryMatrix m;
  m.layout = layout;
  m.data = data;
  m.size_bytes = size_bytes;
  m.rows = shape[0];
  m.cols = shape[1];
  m.scale = scale;
  return m;
}

DenseMatrix TensorView::as_dense() const {
  DenseMatrix m;
  m.type = dense_type;
  m.data = data;
  m.size_bytes = size_bytes;
  m.scales = group_scales;
  m.cols = ndim == 0 ? 0 : shape[ndim - 1];
  m.rows = 1;
  for (uint32_t i = 0; i + 1 < ndim; ++i) m.rows *= shape[i];
  m.group = group;
  return m;
}

namespace {

Error verify_bundle(const uint8_t* data, size_t size, const char* label, const schema::Bundle** root_out,
                    uint32_t* version_out) {
  if (data == nullptr) return fail(Error::InvalidArgument, "%s: no data", label);
  if (reinterpret_cast<uintptr_t>(data) % 8 != 0) {
    return fail(Error::InvalidArgument, "%s: bundle memory must be 8-byte aligned", label);
  }
  if (size < 12) return fail(Error::Truncated, "%s: %zu bytes is too small for a bundle header", label, size);
  if (!flatbuffers::BufferHasIdentifier(data, schema::BundleIdentifier(), /*size_prefixed=*/true)) {
    return fail(Error::BadIdentifier, "%s: missing the \"TERN\" file identifier (not a Tern bundle)", label);
  }
  uint32_t fb_size;
  std::memcpy(&fb_size, data, 4);
  flatbuffers::EndianCheck();
  if (fb_size >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    return fail(Error::InvalidBundle, "%s: FlatBuffer size %u exceeds the FlatBuffers limit", label, fb_size);
  }
  if (fb_size > size - 4) {
    return fail(Error::Truncated, "%s: header says %u bytes of FlatBuffer, file has %zu", label, fb_size, size - 4);
  }
  // The builder aligns the prefixed buffer as a whole, so verify it with its prefix.
  flatbuffers::Verifier verifier(data, 4ull + fb_size, /*max_depth=*/64, /*max_tables=*/10000000);
  if (!verifier.VerifySizePrefixedBuffer<schema::Bundle>(schema::BundleIdentifier())) {
    return fail(Error::InvalidBundle, "%s: FlatBuffer header failed verification (corrupt bundle)", label);
  }
  const schema::Bundle* root = flatbuffers::GetSizePrefixedRoot<schema::Bundle>(data);
  if (root->format_version() != kFormatVersion) {
    return fail(Error::VersionMismatch, "%s: bundle format version %u, this runtime reads version %u", label,
                root->format_version(), kFormatVersion);
  }
  Ctx ctx{label, align_up(4ull + fb_size, kSegmentAlign), root->data_size()};
  if (ctx.data_start > size || ctx.data_size > size - ctx.data_start) {
    return fail(Error::Truncated, "%s: data area [%llu, +%llu) runs past the end of the file (%zu bytes)", label,
                static_cast<unsigned long long>(ctx.data_start), static_cast<unsigned long long>(ctx.data_size), size);
  }
  TERN_RETURN_IF_ERROR(check_config(ctx, root->config()));
  const auto* tensors = root->tensors();
  for (uint32_t i = 0; i < tensors->size(); ++i) {
    const schema::Tensor* t = tensors->Get(i);
    if (i > 0 && !tensors->Get(i - 1)->KeyCompareLessThan(t)) {
      return fail(Error::InvalidBundle, "%s: tensor table not sorted by name at '%s'", label, t->name()->c_str());
    }
    TERN_RETURN_IF_ERROR(check_tensor(ctx, t));
  }
  TERN_RETURN_IF_ERROR(check_model_tensors(ctx, to_config(root->config()), tensors));
  TERN_RETURN_IF_ERROR(check_tokenizer(ctx, root->tokenizer()));
  TERN_RETURN_IF_ERROR(check_kv_profile(ctx, root->config(), root->kv_profile()));
  *root_out = root;
  *version_out = root->format_version();
  return Error::Ok;
}

ModelConfig to_config(const schema::ModelConfig* c) {
  ModelConfig m;
  m.family = static_cast<ModelFamily>(c->family());
  m.hidden = c->hidden();
  m.ffn_hidden = c->ffn_hidden();
  m.layers = c->layers();
  m.heads = c->heads();
  m.kv_heads = c->kv_heads();
  m.head_dim = c->head_dim();
  m.vocab = c->vocab();
  m.max_context = c->max_context();
  m.rope_theta = c->rope_theta();
  m.rope_style = static_cast<RopeStyle>(c->rope_style());
  m.norm_eps = c->norm_eps();
  m.activation = static_cast<Activation>(c->activation());
  m.has_sub_norms = c->has_sub_norms();
  m.tied_embeddings = c->tied_embeddings();
  m.bos_id = c->bos_id();
  m.eos_id = c->eos_id();
  m.eot_id = c->eot_id();
  m.embedding_scale = c->embedding_scale();
  m.attention_scale = c->attention_scale();
  m.rope_local_theta = c->rope_local_theta();
  m.sliding_window = c->sliding_window();
  if (const auto* sliding = c->sliding_layers()) {
    for (uint32_t l = 0; l < sliding->size() && l < 64; ++l) {
      if (sliding->Get(l)) m.sliding_layers |= uint64_t{1} << l;
    }
  }
  if (const schema::Embedding* e = c->embedding()) {
    m.embedding = true;
    m.pooling = static_cast<Pooling>(e->pooling());
    m.embedding_normalize = e->normalize();
    m.embedding_append_eos = e->append_eos();
  }
  return m;
}

}  // namespace

Result<Bundle> Bundle::open(const char* path, MapMode mode) {
  TERN_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path, mode));
  const schema::Bundle* root = nullptr;
  uint32_t version = 0;
  TERN_RETURN_IF_ERROR(verify_bundle(file.data(), file.size(), path, &root, &version));
  Bundle b;
  b.data_ = file.data();
  b.size_ = file.size();
  b.file_ = std::move(file);
  b.root_ = root;
  b.format_version_ = version;
  b.config_ = to_config(root->config());
  return b;
}

Result<Bundle> Bundle::from_memory(const uint8_t* data, size_t size) {
  const schema::Bundle* root = nullptr;
  uint32_t version = 0;
  TERN_RETURN_IF_ERROR(verify_bundle(data, size, "<memory bundle>", &root, &version));
  Bundle b;
  b.data_ = data;
  b.size_ = size;
  b.root_ = root;
  b.format_version_ = version;
  b.config_ = to_config(root->config());
  return b;
}

namespace {

TensorView make_view(const uint8_t* file, uint64_t data_start, const schema::Tensor* t) {
  TensorView v;
  v.name = t->name()->c_str();
  v.type = t->type() == schema::TensorType::Ternary ? TensorType::Ternary : TensorType::Dense;
  v.ndim = t->shape()->size();
  for (uint32_t i = 0; i < v.ndim; ++i) v.shape[i] = t->shape()->Get(i);
  v.data = file + data_start + t->data()->offset();
  v.size_bytes = t->data()->size();
  v.layout = static_cast<TernaryLayout>(t->ternary_layout());
  v.scale = t->scale();
  v.dense_type = static_cast<DenseType>(t->dense_type());
  // Only Q8/Q4 scale segments were checked against the file; ignore any other.
  const bool quantized =
      t->type() == schema::TensorType::Dense && (v.dense_type == DenseType::Q8 || v.dense_type == DenseType::Q4);
  if (quantized && t->group_scales() != nullptr && t->group_scales()->size() != 0) {
    v.group_scales = reinterpret_cast<const float*>(file + data_start + t->group_scales()->offset());
  }
  v.group = t->group_size();
  return v;
}

uint64_t data_start_of(const uint8_t* file) {
  uint32_t fb_size;
  std::memcpy(&fb_size, file, 4);
  return align_up(4ull + fb_size, kSegmentAlign);
}

}  // namespace

uint64_t Bundle::identity() const {
  if (data_ == nullptr) return 0;
  const uint64_t header = data_start_of(data_) < size_ ? data_start_of(data_) : size_;
  return fnv1a(data_, header);
}

Error Bundle::verify_checksum(const char* label, BundleChecksum* out) const {
  *out = BundleChecksum{};
  if (root_ == nullptr) return fail(Error::InvalidState, "bundle not open");
  const schema::Checksum* cs = root_->checksum();
  if (cs == nullptr) return Error::Ok;
  if (cs->algorithm() != schema::ChecksumAlgorithm::Xxh64) {
    return fail(Error::NotSupported, "%s: checksum algorithm %u is not known to this reader", label,
                static_cast<unsigned>(cs->algorithm()));
  }
  out->recorded = true;
  out->header = cs->header();
  out->data = cs->data();
  // The header's hash counts its own two values as zero: hash around them, in file order.
  const uint64_t data_start = data_start_of(data_);
  const auto* table = reinterpret_cast<const flatbuffers::Table*>(cs);
  const uint8_t* fields[2] = {table->GetAddressOf(schema::Checksum::VT_HEADER),
                              table->GetAddressOf(schema::Checksum::VT_DATA)};
  if (fields[0] && fields[1] && fields[1] < fields[0]) std::swap(fields[0], fields[1]);
  Xxh64 header;
  const uint8_t* at = data_;
  for (const uint8_t* field : fields) {
    if (field == nullptr || field < at) continue;  // absent (its default 0) or overlapping (corrupt)
    header.update(at, static_cast<size_t>(field - at));
    header.update_zeros(8);
    at = field + 8;
  }
  header.update(at, static_cast<size_t>(data_ + data_start - at));
  out->header_actual = header.digest();
  out->data_actual = xxh64(data_ + data_start, size_ - data_start);
  out->bytes = size_;
  if (out->header_actual != out->header) {
    return fail(Error::CorruptFile,
                "%s: checksum mismatch in the header (config, tensor table, tokenizer, KV profile: bytes [0, %llu)): "
                "recorded %016llx, computed %016llx",
                label, static_cast<unsigned long long>(data_start), static_cast<unsigned long long>(out->header),
                static_cast<unsigned long long>(out->header_actual));
  }
  if (out->data_actual != out->data) {
    return fail(Error::CorruptFile,
                "%s: checksum mismatch in the data area (the tensors' bytes [%llu, %zu)): recorded %016llx, "
                "computed %016llx",
                label, static_cast<unsigned long long>(data_start), size_, static_cast<unsigned long long>(out->data),
                static_cast<unsigned long long>(out->data_actual));
  }
  return Error::Ok;
}

Result<TensorView> Bundle::tensor(const char* name) const {
  if (root_ == nullptr) return fail(Error::InvalidState, "bundle not open");
  const schema::Tensor* t = root_->tensors()->LookupByKey(name);
  if (t == nullptr) return fail(Error::UnknownTensor, "bundle has no tensor '%s'", name);
  return make_view(data_, data_start_of(data_), t);
}

Result<TensorView> Bundle::layer_tensor(uint32_t layer, const char* suffix) const {
  char name[128];
  const int n = std::snprintf(name, sizeof(name), "layers.%u.%s", layer, suffix);
  if (n < 0 || static_cast<size_t>(n) >= sizeof(name)) {
    return fail(Error::InvalidArgument, "tensor suffix '%s' too long", suffix);
  }
  return tensor(name);
}

bool Bundle::has_tensor(const char* name) const {
  return root_ != nullptr && root_->tensors()->LookupByKey(name) != nullptr;
}

size_t Bundle::tensor_count() const { return root_ == nullptr ? 0 : root_->tensors()->size(); }

Result<TensorView> Bundle::tensor_at(size_t index) const {
  if (root_ == nullptr) return fail(Error::InvalidState, "bundle not open");
  if (index >= root_->tensors()->size()) {
    return fail(Error::OutOfRange, "tensor index %zu of %u", index, root_->tensors()->size());
  }
  return make_view(data_, data_start_of(data_), root_->tensors()->Get(static_cast<uint32_t>(index)));
}

const schema::Tokenizer* Bundle::tokenizer() const { return root_ == nullptr ? nullptr : root_->tokenizer(); }

const schema::KvProfile* Bundle::kv_profile() const { return root_ == nullptr ? nullptr : root_->kv_profile(); }

const schema::Embedding* Bundle::embedding() const { return root_ == nullptr ? nullptr : root_->config()->embedding(); }

}  // namespace tern
