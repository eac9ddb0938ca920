#include "runtime/engine/model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "platform/clock.h"
#include "platform/log.h"
#include "platform/memory.h"
#include "runtime/engine/session.h"
#include "runtime/model/bundle.h"
#include "runtime/model/tensor_names.h"
#include "schema/bundle_generated.h"
#include "schema/tokenizer_generated.h"

namespace tern {

namespace {

constexpr size_t kAlign = 64;

// Re-records the last error with `what` in front (the message buffer is copied first:
// fail() writes into the buffer last_error_message() points at).
Error with_context(Error e, const char* what) {
  char message[512];
  std::snprintf(message, sizeof message, "%s", last_error_message());
  return fail(e, "%s: %s", what, message);
}

size_t converted_norm_bytes(const VectorView& v) {
  return v.data != nullptr && v.type != DenseType::F32 ? align_up(v.size * sizeof(float), kAlign) + kAlign : 0;
}

Error check_ternary(const char* what, uint32_t layer, const TernaryMatrix& m, size_t rows, size_t cols) {
  if (const Error e = ternary_matrix_validate(m); e != Error::Ok) {
    char name[96];
    std::snprintf(name, sizeof name, "layers.%u.%s", layer, what);
    return with_context(e, name);
  }
  if (m.rows != rows || m.cols != cols) {
    return fail(Error::ShapeMismatch, "layers.%u.%s is %zu x %zu, the config needs %zu x %zu", layer, what, m.rows,
                m.cols, rows, cols);
  }
  return Error::Ok;
}

Error check_vector(const char* what, uint32_t layer, const VectorView& v, size_t n, bool required) {
  if (v.data == nullptr) {
    if (required) return fail(Error::UnknownTensor, "layers.%u.%s is missing", layer, what);
    return Error::Ok;
  }
  if (v.type != DenseType::F32 && v.type != DenseType::F16 && v.type != DenseType::BF16) {
    return fail(Error::UnsupportedType, "layers.%u.%s has type %s; norms must be f32, f16 or bf16", layer, what,
                to_string(v.type));
  }
  if (v.size != n) return fail(Error::ShapeMismatch, "layers.%u.%s has %zu values, needs %zu", layer, what, v.size, n);
  return Error::Ok;
}

Error check_dense(const char* what, const DenseMatrix& m, size_t rows, size_t cols) {
  if (const Error e = dense_matrix_validate(m); e != Error::Ok) return with_context(e, what);
  if (m.rows != rows || m.cols != cols) {
    return fail(Error::ShapeMismatch, "%s is %zu x %zu, the config needs %zu x %zu", what, m.rows, m.cols, rows, cols);
  }
  return Error::Ok;
}

Result<const float*> to_f32(const VectorView& v, ArenaAllocator& arena) {
  if (v.data == nullptr) return static_cast<const float*>(nullptr);
  if (v.type == DenseType::F32) return static_cast<const float*>(v.data);
  TERN_ASSIGN_OR_RETURN(float* out, arena.allocate_array<float>(v.size, ArenaPurpose::Weights, kAlign));
  const uint16_t* in = static_cast<const uint16_t*>(v.data);
  for (size_t i = 0; i < v.size; ++i) out[i] = v.type == DenseType::F16 ? f16_to_f32(in[i]) : bf16_to_f32(in[i]);
  return static_cast<const float*>(out);
}

}  // namespace

Error validate_weights(const ModelConfig& c, const ModelWeights& w) {
  TERN_RETURN_IF_ERROR(validate_config(c));
  TERN_CHECK_OR_RETURN(w.layers != nullptr, Error::InvalidArgument, "weights without layers");
  TERN_RETURN_IF_ERROR(check_dense("tok_embeddings", w.tok_embeddings, c.vocab, c.hidden));
  TERN_RETURN_IF_ERROR(check_dense("lm_head", w.lm_head, c.vocab, c.hidden));
  TERN_RETURN_IF_ERROR(check_vector("final norm", 0, w.final_norm, c.hidden, true));
  for (uint32_t l = 0; l < c.layers; ++l) {
    for (size_t i = 0; i < kLayerTensorCount; ++i) {
      const WeightSpec& spec = kLayerTensors[i];
      const size_t rows = tensor_dim(spec.rows, c);
      if (spec.ternary) {
        TERN_RETURN_IF_ERROR(
            check_ternary(spec.name, l, w.layers[l].*spec.ternary_field, rows, tensor_dim(spec.cols, c)));
      } else if (family_traits(c.family)->layer_norms) {
        TERN_RETURN_IF_ERROR(
            check_vector(spec.name, l, w.layers[l].*spec.vector_field, rows, tensor_required(spec, c)));
      }
    }
  }
  return Error::Ok;
}

Result<WeightPages> parse_weights_pages(const char* text) {
  if (text == nullptr || *text == '\0' || std::strcmp(text, "auto") == 0) return WeightPages::Auto;
  if (std::strcmp(text, "map") == 0) return WeightPages::Map;
  if (std::strcmp(text, "copy") == 0) return WeightPages::Copy;
  return fail(Error::InvalidArgument, "weights_pages '%.64s': use auto, map or copy", text);
}

const char* to_string(WeightPages pages) {
  switch (pages) {
    case WeightPages::Auto: return "auto";
    case WeightPages::Map: return "map";
    case WeightPages::Copy: return "copy";
  }
  return "?";
}

KvModeRequest kv_mode_request(const ModelParams& params) {
  KvModeRequest r;
  r.mode = params.kv_mode;
  r.dense_type = params.kv_type;
  r.sink_tokens = params.kv_sink_tokens;
  r.recent_window = params.kv_recent_window;
  r.eviction = params.kv_eviction;
  return r;
}

namespace {

// Weights the model converts into its arena (norms to f32), its tables and RoPE frequencies.
size_t arena_weight_bytes(const ModelConfig& config, const ModelWeights& weights) {
  size_t bytes = 2 * kAlign + config.layers * (sizeof(LayerWeights) + sizeof(LayerRuntime)) + 2 * kAlign +
                 2 * (align_up(config.head_dim / 2 * sizeof(float), kAlign) + kAlign) +
                 converted_norm_bytes(weights.final_norm);
  if (!family_traits(config.family)->layer_norms) return bytes;
  for (uint32_t l = 0; l < config.layers; ++l) {
    for (size_t i = 0; i < kLayerTensorCount; ++i) {
      if (kLayerTensors[i].runtime_field != nullptr) {
        bytes += converted_norm_bytes(weights.layers[l].*kLayerTensors[i].vector_field);
      }
    }
  }
  return bytes;
}

// The token ids grammars walk: the tokenizer's pieces that are model ids (GrammarVocab::build
// takes the same); 0 without a tokenizer.
uint32_t grammar_vocab_tokens(const ModelConfig& config, const schema::Tokenizer* table) {
  if (table == nullptr || table->piece_offsets() == nullptr || table->piece_offsets()->size() < 2) return 0;
  return std::min<uint32_t>(config.vocab, table->piece_offsets()->size() - 1);
}

// The one planning path: the KV cache spec and the memory plan for a model, loaded or not.
// `bits` holds config.layers * config.kv_heads entries (adaptive modes point into it).
Error plan_for(const ModelConfig& config, const ModelWeights& weights, size_t resident_weight_bytes,
               const Bundle* bundle, const ModelParams& params, KvHeadBits* bits, KvCacheSpec* spec, MemoryPlan* plan) {
  TERN_RETURN_IF_ERROR(validate_weights(config, weights));
  TERN_CHECK_OR_RETURN(params.batch_tokens > 0, Error::InvalidArgument, "batch_tokens must be > 0");
  TERN_ASSIGN_OR_RETURN(const WeightPages pages, parse_weights_pages(params.weights_pages));
  TERN_CHECK_OR_RETURN(pages != WeightPages::Copy || bundle != nullptr, Error::InvalidArgument,
                       "weights_pages 'copy' copies a bundle's mapping: these weights are the caller's");
  const schema::KvProfile* calibrated = bundle != nullptr ? bundle->kv_profile() : nullptr;
  bool auto_mode = kv_mode_is_auto(params.kv_mode);
  KvModeRequest kv_request = kv_mode_request(params);
  if (config.embedding) {
    // Texts share the cache side by side and sliding layers attend from a window's start:
    // the dense cache's positions. "auto" is its half-size form.
    if (auto_mode) kv_request.mode = "fp16";
    auto_mode = false;
    TERN_RETURN_IF_ERROR(make_kv_cache_spec(kv_request, config, calibrated, bits, spec));
    TERN_CHECK_OR_RETURN(!spec->compressed, Error::NotSupported,
                         "kv mode %s: an embedding model keeps its KV cache dense (f32 or fp16)", spec->name);
  }
  if (!auto_mode) TERN_RETURN_IF_ERROR(make_kv_cache_spec(kv_request, config, calibrated, bits, spec));
  MemoryPlanRequest request;
  request.config = config;
  request.budget_bytes = params.memory_budget_bytes;
  // The copy holds the same bytes as the mapping it replaces, in anonymous memory.
  request.resident_weight_bytes = pages == WeightPages::Copy ? 0 : resident_weight_bytes;
  request.anonymous_weight_bytes = pages == WeightPages::Copy ? resident_weight_bytes : 0;
  request.arena_weight_bytes = arena_weight_bytes(config, weights);
  const schema::Tokenizer* tokenizer_table = bundle != nullptr ? bundle->tokenizer() : nullptr;
  request.tokenizer_bytes = tokenizer_table != nullptr ? Tokenizer::required_arena_bytes(tokenizer_table) + kAlign : 0;
  request.grammar_bytes = params.grammar_bytes;
  if (request.grammar_bytes == kGrammarBytesAuto) {
    request.grammar_bytes = config.embedding ? 0 : auto_grammar_bytes(grammar_vocab_tokens(config, tokenizer_table));
  }
  if (request.grammar_bytes > 0 && tokenizer_table != nullptr) {
    request.tokenizer_bytes += GrammarVocab::required_arena_bytes(tokenizer_table) + kAlign;
  }
  request.batch_tokens = params.batch_tokens;
  request.context_request = default_context_request(config, params.memory_budget_bytes, params.context_tokens);
  request.sessions = params.sessions == 0 ? 1 : params.sessions;
  request.draft_tokens = params.draft_tokens;
  request.kv = spec;
  if (auto_mode) {  // the planner picks the mode (and fills spec)
    TERN_ASSIGN_OR_RETURN(*plan, plan_memory_auto(request, kv_mode_request(params), calibrated, bits, spec));
    return Error::Ok;
  }
  request.context_exact = true;  // an explicit n_ctx is never shrunk to fit: BudgetTooSmall with the numbers
  TERN_ASSIGN_OR_RETURN(*plan, plan_memory(request));
  return Error::Ok;
}

// The plan in one debug line: what the context came from, the KV cache, the grammar memory
// and the total against the budget.
void log_plan(const MemoryPlan& p, const ModelParams& params) {
  if (log_level() > LogLevel::Debug) return;
  constexpr double kMiB = 1024.0 * 1024.0;
  const char* why = params.context_tokens > 0 ? "asked" : params.memory_budget_bytes > 0 ? "the budget's" : "default";
  char budget[48] = "no budget";
  if (params.memory_budget_bytes > 0) {
    std::snprintf(budget, sizeof budget, "budget %.2f MiB", static_cast<double>(params.memory_budget_bytes) / kMiB);
  }
  log(LogLevel::Debug,
      "plan: context %u tokens (%s), kv %s %.1f B/token, %u session%s of %.2f MiB (KV %.2f MiB, scratch %.2f MiB, "
      "grammar %.2f MiB), weights %.2f MiB%s, arena %.2f MiB, total %.2f MiB, %s",
      p.context_tokens, why, p.kv_mode, p.kv_bytes_per_token, p.sessions, p.sessions == 1 ? "" : "s",
      static_cast<double>(p.session_bytes) / kMiB, static_cast<double>(p.kv_bytes) / kMiB,
      static_cast<double>(p.scratch_bytes) / kMiB, static_cast<double>(p.grammar_bytes) / kMiB,
      static_cast<double>(p.resident_weight_bytes + p.anonymous_weight_bytes) / kMiB,
      p.anonymous_weight_bytes > 0 ? " (anonymous copy)" : "", static_cast<double>(p.arena_bytes) / kMiB,
      static_cast<double>(p.total_bytes) / kMiB, budget);
}

// Views of a bundle's weights (the layer table is allocated; the data stays in the mapping).
struct BundleWeights {
  std::unique_ptr<LayerWeights[]> layers;
  ModelWeights weights;
};
Result<BundleWeights> bundle_weights(const Bundle& bundle);

}  // namespace

Result<MemoryPlan> plan_model(const Bundle& bundle, const ModelParams& params) {
  TERN_ASSIGN_OR_RETURN(BundleWeights w, bundle_weights(bundle));
  const ModelConfig& config = bundle.config();
  const size_t heads = static_cast<size_t>(config.layers) * config.kv_heads;
  std::unique_ptr<KvHeadBits[]> bits(new (std::nothrow) KvHeadBits[heads]);
  TERN_CHECK_OR_RETURN(bits != nullptr, Error::OutOfMemory, "cannot allocate %zu KV head entries", heads);
  KvCacheSpec spec;
  MemoryPlan plan;
  TERN_RETURN_IF_ERROR(plan_for(config, w.weights, bundle.file_size(), &bundle, params, bits.get(), &spec, &plan));
  return plan;
}

Result<std::unique_ptr<Model>> Model::create(const ModelConfig& config, const ModelWeights& weights,
                                             const ModelParams& params, size_t resident_weight_bytes) {
  std::unique_ptr<Model> model(new (std::nothrow) Model());
  TERN_CHECK_OR_RETURN(model != nullptr, Error::OutOfMemory, "cannot allocate the model object");
  TERN_RETURN_IF_ERROR(model->init(config, weights, params, resident_weight_bytes));
  return model;
}

Error Model::init(const ModelConfig& config, const ModelWeights& weights, const ModelParams& params,
                  size_t resident_weight_bytes) {
  config_ = config;
  params_ = params;
  params_.kv_mode = nullptr;  // the caller's string; kv_spec_.name keeps the resolved mode
  params_.weights_pages = nullptr;
  weights_ = weights;
  TERN_ASSIGN_OR_RETURN(weights_pages_, parse_weights_pages(params.weights_pages));
  const size_t heads = static_cast<size_t>(config.layers) * config.kv_heads;
  kv_bits_.reset(new (std::nothrow) KvHeadBits[heads]);
  TERN_CHECK_OR_RETURN(kv_bits_ != nullptr, Error::OutOfMemory, "cannot allocate %zu KV head entries", heads);
  TERN_RETURN_IF_ERROR(
      plan_for(config, weights, resident_weight_bytes, bundle_.get(), params, kv_bits_.get(), &kv_spec_, &plan_));
  if (const uint64_t physical = physical_memory(); physical > 0 && params.memory_budget_bytes > physical) {
    log(LogLevel::Warning,
        "memory budget %llu bytes (%.1f MiB) is above this machine's physical memory, %llu bytes (%.1f MiB): it "
        "bounds nothing the machine can give (planned %.1f MiB)",
        static_cast<unsigned long long>(params.memory_budget_bytes),
        static_cast<double>(params.memory_budget_bytes) / (1024.0 * 1024.0), static_cast<unsigned long long>(physical),
        static_cast<double>(physical) / (1024.0 * 1024.0), static_cast<double>(plan_.total_bytes) / (1024.0 * 1024.0));
  }
  log_plan(plan_, params);
  bundle_identity_ = bundle_ != nullptr ? bundle_->identity() : 0;
  kv_layout_identity_ = tern::kv_layout_identity(kv_spec_, plan_.context_tokens);
  // Debug switch: measure generation past the capacity without re-positioning the sinks.
  const char* no_reposition = std::getenv("TERN_KV_NO_SINK_REPOSITION");
  kv_sink_reposition_ = no_reposition == nullptr || no_reposition[0] == '\0' || no_reposition[0] == '0';
  const bool layer_norms = family_traits(config.family)->layer_norms;
  TERN_ASSIGN_OR_RETURN(pool_, ThreadPool::create(params.threads));
  if (params.threads > pool_.num_threads()) {
    log(LogLevel::Warning, "%u threads requested, %zu cores available: using %zu", params.threads, available_cores(),
        pool_.num_threads());
  }
  // Kernel dispatch initializes on first use (CPU detection allocates): do it at load,
  // never inside the first prefill.
  init_kernels();

  void* buffer = params.arena_buffer;
  if (buffer != nullptr) {
    TERN_CHECK_OR_RETURN(params.arena_buffer_bytes >= plan_.arena_bytes, Error::ArenaExhausted,
                         "the caller's arena of %zu bytes is smaller than the planned %zu bytes",
                         params.arena_buffer_bytes, plan_.arena_bytes);
  } else {
    owned_arena_ = std::aligned_alloc(kAlign, align_up(plan_.arena_bytes, kAlign));
    TERN_CHECK_OR_RETURN(owned_arena_ != nullptr, Error::OutOfMemory, "cannot allocate the %zu-byte arena",
                         plan_.arena_bytes);
    buffer = owned_arena_;
  }
  arena_.reset(buffer, buffer == owned_arena_ ? align_up(plan_.arena_bytes, kAlign) : params.arena_buffer_bytes);

  TERN_ASSIGN_OR_RETURN(layers_, arena_.allocate_array<LayerWeights>(config.layers, ArenaPurpose::Other, kAlign));
  TERN_ASSIGN_OR_RETURN(layer_runtime_,
                        arena_.allocate_array<LayerRuntime>(config.layers, ArenaPurpose::Other, kAlign));
  for (uint32_t l = 0; l < config.layers; ++l) {
    layers_[l] = weights.layers[l];
    layer_runtime_[l] = LayerRuntime{};
    if (!layer_norms) continue;
    for (size_t i = 0; i < kLayerTensorCount; ++i) {
      const WeightSpec& spec = kLayerTensors[i];
      if (spec.runtime_field == nullptr) continue;
      TERN_ASSIGN_OR_RETURN(layer_runtime_[l].*spec.runtime_field, to_f32(layers_[l].*spec.vector_field, arena_));
    }
  }
  weights_.layers = layers_;
  TERN_ASSIGN_OR_RETURN(final_norm_, to_f32(weights.final_norm, arena_));
  const size_t half = config.head_dim / 2;
  TERN_ASSIGN_OR_RETURN(rope_inv_freq_, arena_.allocate_array<float>(half, ArenaPurpose::Other, kAlign));
  TERN_ASSIGN_OR_RETURN(rope_local_inv_freq_, arena_.allocate_array<float>(half, ArenaPurpose::Other, kAlign));
  const float local_theta = config.rope_local_theta > 0.0f ? config.rope_local_theta : config.rope_theta;
  for (size_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(config.head_dim);
    rope_inv_freq_[i] = 1.0f / std::pow(config.rope_theta, exponent);
    rope_local_inv_freq_[i] = 1.0f / std::pow(local_theta, exponent);
  }
  if (const schema::Tokenizer* tokenizer_table = bundle_ != nullptr ? bundle_->tokenizer() : nullptr) {
    TERN_ASSIGN_OR_RETURN(tokenizer_, Tokenizer::create(tokenizer_table, arena_));
    has_tokenizer_ = true;
    chat_format_ = chat_format_of(tokenizer_table, &tokenizer_);
    if (plan_.grammar_bytes > 0) {
      // The ids sessions sample: the tokenizer's (padded embedding rows are never text).
      const uint32_t ids = std::min<uint32_t>(config.vocab, static_cast<uint32_t>(tokenizer_.vocab_size()));
      TERN_RETURN_IF_ERROR(grammar_vocab_.build(tokenizer_, ids, arena_));
    }
  }
  // The session slots, each a region of the same planned size.
  static_assert(sizeof(SessionSlot) <= kSessionSlotBytes, "kSessionSlotBytes is too small");
  TERN_ASSIGN_OR_RETURN(void* table,
                        arena_.allocate(session_table_bytes(plan_.sessions) - kAlign, kAlign, ArenaPurpose::Other));
  slots_ = static_cast<SessionSlot*>(table);
  const size_t used_before = arena_.used_bytes();
  for (uint32_t i = 0; i < plan_.sessions; ++i) {
    TERN_ASSIGN_OR_RETURN(void* region,
                          arena_.allocate(plan_.session_bytes - kAlign, kAlign, ArenaPurpose::SessionSlots));
    new (&slots_[i]) SessionSlot();
    slots_[i].arena.reset(region, plan_.session_bytes - kAlign);
  }
  slot_region_bytes_ = arena_.used_bytes() - used_before;
  return Error::Ok;
}

Result<size_t> Model::encode(const char* text, size_t len, bool add_bos, bool parse_special, int32_t* out,
                             size_t capacity, size_t* needed) {
  TERN_CHECK_OR_RETURN(has_tokenizer_, Error::InvalidState, "the model has no tokenizer (not from a bundle)");
  std::lock_guard<std::mutex> lock(tokenizer_mutex_);
  return tokenizer_.encode(text, len, add_bos, parse_special, out, capacity, needed);
}

const char* Model::chat_template() const {
  const schema::Tokenizer* t = bundle_ != nullptr ? bundle_->tokenizer() : nullptr;
  if (t == nullptr || t->chat_template() == nullptr || t->chat_template()->size() == 0) return nullptr;
  return t->chat_template()->c_str();
}

namespace {

Result<VectorView> vector_of(const Bundle& bundle, uint32_t layer, const char* suffix, bool per_layer) {
  VectorView v;
  TensorView t;
  if (per_layer) {
    char name[96];
    std::snprintf(name, sizeof name, "layers.%u.%s", layer, suffix);
    if (!bundle.has_tensor(name)) return v;
    TERN_ASSIGN_OR_RETURN(t, bundle.tensor(name));
  } else {
    if (!bundle.has_tensor(suffix)) return v;
    TERN_ASSIGN_OR_RETURN(t, bundle.tensor(suffix));
  }
  if (t.type != TensorType::Dense) return fail(Error::UnsupportedType, "norm %s is not a dense tensor", t.name);
  v.type = t.dense_type;
  v.data = t.data;
  v.size = 1;
  for (uint32_t i = 0; i < t.ndim; ++i) v.size *= t.shape[i];
  return v;
}

Result<TernaryMatrix> ternary_of(const Bundle& bundle, uint32_t layer, const char* suffix) {
  TERN_ASSIGN_OR_RETURN(TensorView t, bundle.layer_tensor(layer, suffix));
  if (t.type != TensorType::Ternary || t.ndim != 2) {
    return fail(Error::UnsupportedType, "layers.%u.%s is not a 2-D ternary tensor", layer, suffix);
  }
  return t.as_ternary();
}

}  // namespace

namespace {

Result<BundleWeights> bundle_weights(const Bundle& bundle) {
  const ModelConfig& config = bundle.config();
  TERN_CHECK_OR_RETURN(config.layers > 0 && config.layers <= 4096, Error::InvalidBundle, "%u layers", config.layers);
  BundleWeights out;
  out.layers.reset(new (std::nothrow) LayerWeights[config.layers]);
  TERN_CHECK_OR_RETURN(out.layers != nullptr, Error::OutOfMemory, "cannot allocate %u layer descriptors",
                       config.layers);
  ModelWeights& weights = out.weights;
  TERN_ASSIGN_OR_RETURN(TensorView embeddings, bundle.tensor(tensor_names::kTokEmbeddings));
  TERN_CHECK_OR_RETURN(embeddings.type == TensorType::Dense, Error::UnsupportedType, "tok_embeddings is not dense");
  weights.tok_embeddings = embeddings.as_dense();
  weights.lm_head = weights.tok_embeddings;
  if (bundle.has_tensor(tensor_names::kLmHead)) {
    TERN_ASSIGN_OR_RETURN(TensorView head, bundle.tensor(tensor_names::kLmHead));
    TERN_CHECK_OR_RETURN(head.type == TensorType::Dense, Error::UnsupportedType, "lm_head is not dense");
    weights.lm_head = head.as_dense();
  }
  TERN_ASSIGN_OR_RETURN(weights.final_norm, vector_of(bundle, 0, tensor_names::kFinalNorm, false));
  for (uint32_t l = 0; l < config.layers; ++l) {
    for (size_t i = 0; i < kLayerTensorCount; ++i) {
      const WeightSpec& spec = kLayerTensors[i];
      if (spec.ternary) {
        TERN_ASSIGN_OR_RETURN(out.layers[l].*spec.ternary_field, ternary_of(bundle, l, spec.name));
      } else {
        TERN_ASSIGN_OR_RETURN(out.layers[l].*spec.vector_field, vector_of(bundle, l, spec.name, true));
      }
    }
  }
  weights.layers = out.layers.get();
  return out;
}

}  // namespace

Result<std::unique_ptr<Model>> Model::load(const char* path, const ModelParams& params) {
  TERN_CHECK_OR_RETURN(path != nullptr && *path != '\0', Error::InvalidArgument, "no bundle path given");
  TERN_ASSIGN_OR_RETURN(Bundle opened, Bundle::open(path));
  std::unique_ptr<Model> model(new (std::nothrow) Model());
  TERN_CHECK_OR_RETURN(model != nullptr, Error::OutOfMemory, "cannot allocate the model object");
  model->bundle_.reset(new (std::nothrow) Bundle(std::move(opened)));
  TERN_CHECK_OR_RETURN(model->bundle_ != nullptr, Error::OutOfMemory, "cannot allocate the bundle object");
  auto weights = bundle_weights(*model->bundle_);
  if (!weights.ok()) return with_context(weights.error(), path);
  // Every page of the file may become resident (the header and tokenizer too): the plan
  // counts the file's size. init copies the layer table into the arena.
  Error e = model->init(model->bundle_->config(), weights->weights, params, model->bundle_->file_size());
  if (e == Error::Ok) e = model->place_weights();
  if (e != Error::Ok) return with_context(e, path);
  return model;
}

Error Model::place_weights() {
  MappedFile& file = bundle_->file();
  const uint64_t start = monotonic_ns();
  size_t reread = 0;
  if (weights_pages_ == WeightPages::Auto) weights_pages_load_ = file.use_large_pages(&reread);
  if (weights_pages_ == WeightPages::Copy) {
    TERN_RETURN_IF_ERROR(file.copy_to_large_pages());
    weights_pages_load_ = LargePages::Copied;
  }
  file.release_descriptor();
  if (log_level() <= LogLevel::Debug && weights_pages_ != WeightPages::Map) {
    const WeightPagesReport r = weights_pages();
    constexpr double kMiB = 1024.0 * 1024.0;
    char again[48] = "";
    if (reread > 0) std::snprintf(again, sizeof again, " %.1f MiB", static_cast<double>(reread) / kMiB);
    log(LogLevel::Debug, "weights: pages %s (%s%s, %.2f s), %.1f of %.1f MiB in large pages", to_string(r.mode),
        to_string(r.load), again, seconds_between(start, monotonic_ns()),
        static_cast<double>(r.usage.large_bytes) / kMiB, static_cast<double>(r.bytes) / kMiB);
  }
  return Error::Ok;
}

WeightPagesReport Model::weights_pages() const {
  WeightPagesReport r;
  r.mode = weights_pages_;
  r.load = weights_pages_load_;
  r.large_page_bytes = large_page_bytes();
  if (bundle_ == nullptr) return r;
  const MappedFile& file = bundle_->file();
  r.mapped = file.is_mapped();
  r.anonymous = file.is_anonymous();
  r.bytes = file.size();
  r.usage = file.page_usage();
  // Counted by whole pages, and a copy's mapping may have merged with a neighbour's.
  r.usage.resident_bytes = std::min(r.usage.resident_bytes, r.bytes);
  r.usage.large_bytes = std::min(r.usage.large_bytes, r.bytes);
  return r;
}

Model::~Model() {
  for (uint32_t i = 0; slots_ != nullptr && i < plan_.sessions; ++i) {
    if (slots_[i].session != nullptr) slots_[i].session->~Session();
  }
  std::free(owned_arena_);
}

Result<Session*> Model::create_session(const SamplerParams& sampler) {
  TERN_RETURN_IF_ERROR(validate(sampler));
  std::lock_guard<std::mutex> lock(slots_mutex_);
  SessionSlot* slot = nullptr;
  for (uint32_t i = 0; i < plan_.sessions && slot == nullptr; ++i) {
    if (slots_[i].session == nullptr) slot = &slots_[i];
  }
  if (slot == nullptr) {
    return fail(Error::InvalidState, "all %u session slot%s of the model %s in use (load it with more n_sessions)",
                plan_.sessions, plan_.sessions == 1 ? "" : "s", plan_.sessions == 1 ? "is" : "are");
  }
  ArenaAllocator& arena = slot->arena;
  arena.release_to(ArenaAllocator::Mark{});
  TERN_ASSIGN_OR_RETURN(void* place, arena.allocate(sizeof(Session), kAlign, ArenaPurpose::Other));
  Session* session = new (place) Session();
  const Error e = session->init(*this, sampler, arena);
  if (e != Error::Ok) {
    session->~Session();
    arena.release_to(ArenaAllocator::Mark{});
    return e;
  }
  slot->session = session;
  return session;
}

void Model::destroy_session(Session* session) {
  if (session == nullptr) return;
  std::lock_guard<std::mutex> lock(slots_mutex_);
  for (uint32_t i = 0; i < plan_.sessions; ++i) {
    if (slots_[i].session != session) continue;
    session->~Session();
    slots_[i].session = nullptr;
    slots_[i].arena.release_to(ArenaAllocator::Mark{});
    return;
  }
}

// Under the slots' lock: a session is destroyed under it too, and a session clears its
// `grammar_shared_` under it before its grammar memory changes, so a shared grammar is never
// copied while it goes away.
Result<bool> Model::copy_shared_grammar(Session& to, const char* text, size_t size) {
  std::lock_guard<std::mutex> lock(slots_mutex_);
  to.grammar_shared_ = false;
  for (uint32_t i = 0; i < plan_.sessions; ++i) {
    const Session* from = slots_[i].session;
    if (from == nullptr || from == &to || !from->grammar_shared_ || !from->grammar_.compiled_from(text, size)) {
      continue;
    }
    if (to.grammar_.copy_from(from->grammar_, to.buffers_.grammar, to.buffers_.grammar_bytes) != Error::Ok) {
      return false;  // it does not fit here: compiled instead, naming what it needs
    }
    to.grammar_shared_ = true;
    return true;
  }
  return false;
}

void Model::grammar_compiled(Session& session, bool ok) {
  std::lock_guard<std::mutex> lock(slots_mutex_);
  session.grammar_shared_ = ok;
}

uint32_t Model::sessions_in_use() const {
  std::lock_guard<std::mutex> lock(slots_mutex_);
  uint32_t n = 0;
  for (uint32_t i = 0; i < plan_.sessions; ++i) n += slots_[i].session != nullptr;
  return n;
}

size_t Model::arena_used_bytes() const {
  std::lock_guard<std::mutex> lock(slots_mutex_);
  size_t used = arena_.used_bytes() - slot_region_bytes_;
  for (uint32_t i = 0; i < plan_.sessions; ++i) used += slots_[i].arena.used_bytes();
  return used;
}

size_t Model::arena_used_bytes(ArenaPurpose purpose) const {
  std::lock_guard<std::mutex> lock(slots_mutex_);
  size_t used = arena_.used_bytes(purpose);
  for (uint32_t i = 0; i < plan_.sessions; ++i) used += slots_[i].arena.used_bytes(purpose);
  return used;
}

}  // namespace tern
