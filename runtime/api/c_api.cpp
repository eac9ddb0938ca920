// The C API over Model and Session. tern_model is a Model and tern_session a Session
// (opaque casts): nothing is allocated here beyond what load and session creation do.
// This file implements the deprecated tern_model_params.kv_type: reading it is not a use.
// Before the include: clang reports the struct's implicit copies at the field's declaration.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include "include/tern.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "platform/atomic_file.h"
#include "platform/error.h"
#include "platform/file_map.h"
#include "platform/log.h"
#include "platform/memory.h"
#include "runtime/api/c_api_support.h"
#include "runtime/base/version.h"
#include "runtime/engine/memory_plan.h"
#include "runtime/engine/model.h"
#include "runtime/engine/session.h"
#include "runtime/kv/kv_profile.h"
#include "runtime/model/bundle.h"
#include "runtime/structured/json_schema.h"
#include "runtime/text/tokenizer.h"
#include "schema/bundle_generated.h"

namespace tern {
namespace {

// Writes beside the target and renames, so a crash or a full disk never leaves half a state
// where a good one was. The bytes come from the arena-free save into a heap buffer: files are
// for suspending an app, outside generation.
Error save_state_file(const Session& session, const char* path) {
  const size_t size = session.state_size();
  std::unique_ptr<uint8_t[]> buf(new (std::nothrow) uint8_t[size]);
  TERN_CHECK_OR_RETURN(buf != nullptr, Error::OutOfMemory, "cannot allocate %zu bytes for the session state", size);
  TERN_ASSIGN_OR_RETURN(const size_t written, session.save_state(buf.get(), size));
  return write_file_atomically(path, buf.get(), written);
}

#define TERN_CHECK_SAME_(name, cname, value, msg) \
  static_assert(static_cast<int>(Error::name) == static_cast<int>(TERN_##cname), "tern_status differs from Error");
TERN_ERROR_LIST(TERN_CHECK_SAME_)
#undef TERN_CHECK_SAME_
static_assert(static_cast<int>(KvType::F16) == TERN_KV_F16 && static_cast<int>(KvType::F32) == TERN_KV_F32, "kv");
static_assert(static_cast<int>(LogLevel::Debug) == TERN_LOG_DEBUG && static_cast<int>(LogLevel::Off) == TERN_LOG_OFF,
              "log levels");
static_assert(static_cast<int>(StopReason::ContextFull) == TERN_STOP_CONTEXT_FULL, "stop reasons");
static_assert(static_cast<int>(EmbedFormat::Binary) == TERN_EMBED_BINARY &&
                  static_cast<int>(Pooling::First) == TERN_POOLING_FIRST,
              "embedding enums");

Model* as_model(tern_model* m) { return reinterpret_cast<Model*>(m); }
const Model* as_model(const tern_model* m) { return reinterpret_cast<const Model*>(m); }
Session* as_session(tern_session* s) { return reinterpret_cast<Session*>(s); }
const Session* as_session(const tern_session* s) { return reinterpret_cast<const Session*>(s); }

// Each field of tern_model_params beside its ModelParams name, likewise for both directions.
#define TERN_MODEL_PARAM_FIELDS_(X)           \
  X(memory_budget_bytes, memory_budget_bytes) \
  X(arena_buffer, arena_buffer)               \
  X(arena_buffer_bytes, arena_buffer_bytes)   \
  X(n_threads, threads)                       \
  X(n_ctx, context_tokens)                    \
  X(n_batch, batch_tokens)                    \
  X(kv_type, kv_type)                         \
  X(kv_mode, kv_mode)                         \
  X(kv_sink_tokens, kv_sink_tokens)           \
  X(kv_recent_window, kv_recent_window)       \
  X(kv_eviction, kv_eviction)                 \
  X(n_sessions, sessions)                     \
  X(n_draft, draft_tokens)                    \
  X(grammar_bytes, grammar_bytes)             \
  X(weights_pages, weights_pages)

// The load parameters, checked the same way for tern_model_load and tern_plan.
tern_status to_cpp(const tern_model_params& p, const char* function, ModelParams* out) {
  if (p.kv_type != TERN_KV_F16 && p.kv_type != TERN_KV_F32) {
    return status(fail(Error::InvalidArgument, "%s: unknown kv_type %d", function, static_cast<int>(p.kv_type)));
  }
  if (p.n_batch == 0) return status(fail(Error::InvalidArgument, "%s: n_batch must be > 0", function));
  if ((p.arena_buffer == nullptr) != (p.arena_buffer_bytes == 0)) {
    return status(fail(Error::InvalidArgument, "%s: arena_buffer and arena_buffer_bytes disagree", function));
  }
  if (p.grammar_bytes != TERN_GRAMMAR_BYTES_AUTO && p.grammar_bytes >= kGrammarBytesAuto) {
    return status(fail(Error::InvalidArgument, "%s: grammar_bytes %llu is too large", function,
                       static_cast<unsigned long long>(p.grammar_bytes)));
  }
  if (auto pages = parse_weights_pages(p.weights_pages); !pages.ok()) return status(pages.error());
  ModelParams mp;
#define TERN_TO_CPP_(c_field, cpp_field) mp.cpp_field = static_cast<decltype(mp.cpp_field)>(p.c_field);
  TERN_MODEL_PARAM_FIELDS_(TERN_TO_CPP_)
#undef TERN_TO_CPP_
  if (p.grammar_bytes == TERN_GRAMMAR_BYTES_AUTO) mp.grammar_bytes = kGrammarBytesAuto;
  *out = mp;
  return TERN_OK;
}

struct CallbackAdapter {
  tern_piece_callback callback;
  void* user_data;
  static bool call(const char* text, size_t size, void* self) {
    const auto* a = static_cast<const CallbackAdapter*>(self);
    return a->callback(text, size, a->user_data) == 0;
  }
};

struct LogAdapter {
  tern_log_callback callback = nullptr;
  void* user_data = nullptr;
  static void call(LogLevel level, const char* message, void* self) {
    const auto* a = static_cast<const LogAdapter*>(self);
    a->callback(static_cast<tern_log_level>(static_cast<int>(level)), message, a->user_data);
  }
};
LogAdapter g_log_adapter;

}  // namespace
}  // namespace tern

using namespace tern;

extern "C" {

static_assert(TERN_DEFAULT_N_CTX == kDefaultContextTokens &&
                  TERN_DEFAULT_EMBEDDING_N_CTX == kDefaultEmbeddingContextTokens,
              "the header's default contexts are the planner's");

tern_model_params tern_model_default_params(void) {
  const ModelParams d;  // its arena_buffer and kv_mode are null
  tern_model_params p;
#define TERN_TO_C_(c_field, cpp_field) p.c_field = static_cast<decltype(p.c_field)>(d.cpp_field);
  TERN_MODEL_PARAM_FIELDS_(TERN_TO_C_)
#undef TERN_TO_C_
  if (d.grammar_bytes == kGrammarBytesAuto) p.grammar_bytes = TERN_GRAMMAR_BYTES_AUTO;  // SIZE_MAX may be 32 bits
  // Apps get the fp16 cache: half of f32's bytes, what kv_mode "auto" picks when nothing limits
  // it. ModelParams keeps f32, the exact cache the engine's reference tests compare against.
  p.kv_type = TERN_KV_F16;
  return p;
}

tern_sampler_params tern_sampler_default_params(void) {
  const SamplerParams d;
  tern_sampler_params p;
#define TERN_COPY_(field) p.field = d.field;
  TERN_SAMPLER_PARAM_FIELDS_(TERN_COPY_)
#undef TERN_COPY_
  return p;
}

tern_session_params tern_session_default_params(void) {
  tern_session_params p;
  p.sampler = tern_sampler_default_params();
  p.n_draft = 0;
  p.draft_model = nullptr;
  p.grammar = nullptr;
  return p;
}

tern_generate_params tern_generate_default_params(void) {
  const GenerateOptions d;
  tern_generate_params p;
  p.max_new_tokens = d.max_new_tokens;
  p.add_bos = d.add_bos ? 1 : 0;
  p.parse_special = d.parse_special ? 1 : 0;
  p.stop_strings = nullptr;
  p.n_stop_strings = 0;
  return p;
}

const char* tern_status_string(tern_status s) {
  switch (s) {
#define TERN_C_NAME_(name, cname, value, msg) \
  case TERN_##cname: return #cname;
    TERN_ERROR_LIST(TERN_C_NAME_)
#undef TERN_C_NAME_
  }
  return "UNKNOWN";
}

const char* tern_last_error_message(void) { return last_error_message(); }
const char* tern_version(void) { return version_string(); }

tern_status tern_parse_byte_size(const char* text, uint64_t* out_bytes) {
  TERN_C_REQUIRE_(text);
  TERN_C_REQUIRE_(out_bytes);
  auto bytes = parse_byte_size(text);
  if (!bytes.ok()) return status(bytes.error());
  *out_bytes = *bytes;
  return TERN_OK;
}

void tern_set_log_callback(tern_log_callback callback, void* user_data) {
  if (callback == nullptr) {
    set_log_callback(nullptr, nullptr);
    return;
  }
  g_log_adapter.callback = callback;
  g_log_adapter.user_data = user_data;
  set_log_callback(&LogAdapter::call, &g_log_adapter);
}

void tern_set_log_level(tern_log_level level) { set_log_level(static_cast<LogLevel>(static_cast<int>(level))); }

tern_status tern_model_load(const char* path, const tern_model_params* params, tern_model** out_model) {
  TERN_C_REQUIRE_(out_model);
  *out_model = nullptr;
  TERN_C_REQUIRE_(path);
  const tern_model_params p = params != nullptr ? *params : tern_model_default_params();
  ModelParams mp;
  if (const tern_status s = to_cpp(p, __func__, &mp); s != TERN_OK) return s;
  auto model = Model::load(path, mp);
  if (!model.ok()) return status(model.error());
  *out_model = reinterpret_cast<tern_model*>(std::move(model).value().release());
  return TERN_OK;
}

void tern_model_free(tern_model* model) { delete as_model(model); }

tern_status tern_model_get_info(const tern_model* model, tern_model_info* out_info) {
  TERN_C_REQUIRE_(model);
  TERN_C_REQUIRE_(out_info);
  const Model& m = *as_model(model);
  const ModelConfig& c = m.config();
  out_info->vocab_size = c.vocab;
  out_info->context_tokens = m.plan().context_tokens;
  out_info->max_context = c.max_context;
  out_info->layers = c.layers;
  out_info->hidden = c.hidden;
  out_info->heads = c.heads;
  out_info->kv_heads = c.kv_heads;
  out_info->head_dim = c.head_dim;
  const Tokenizer* t = m.tokenizer();
  out_info->bos_id = t != nullptr ? t->bos_id() : c.bos_id;
  out_info->eos_id = t != nullptr ? t->eos_id() : c.eos_id;
  out_info->eot_id = t != nullptr ? t->eot_id() : c.eot_id;
  out_info->chat_template = m.chat_template();
  out_info->n_threads = static_cast<uint32_t>(m.threads());
  out_info->chat_format = m.chat_format().name;
  out_info->chat_stop = m.chat_format().stop;
  out_info->n_sessions = m.plan().sessions;
  return TERN_OK;
}

tern_status tern_model_budget_above_physical(const tern_model* model, int* out_above, uint64_t* out_physical_bytes) {
  TERN_C_REQUIRE_(model);
  TERN_C_REQUIRE_(out_above);
  const uint64_t physical = physical_memory();
  const uint64_t budget = as_model(model)->budget_bytes();
  *out_above = physical > 0 && budget > physical ? 1 : 0;
  if (out_physical_bytes != nullptr) *out_physical_bytes = physical;
  return TERN_OK;
}

tern_status tern_memory_report_get(const tern_model* model, tern_memory_report* r) {
  TERN_C_REQUIRE_(model);
  TERN_C_REQUIRE_(r);
  const Model& m = *as_model(model);
  const MemoryPlan& plan = m.plan();
  std::memset(r, 0, sizeof *r);
  r->budget_bytes = 0;
  r->planned_total_bytes = plan.total_bytes;
  r->minimum_budget_bytes = plan.minimum_budget_bytes;
  r->process_overhead_bytes = plan.overhead_bytes;
  r->weights_bytes = plan.resident_weight_bytes + plan.anonymous_weight_bytes;
  r->arena_bytes = plan.arena_bytes;
  r->arena_used_bytes = m.arena_used_bytes();
  r->arena_weights_bytes = m.arena_used_bytes(ArenaPurpose::Weights);
  r->arena_tokenizer_bytes = m.arena_used_bytes(ArenaPurpose::Tokenizer);
  r->arena_scratch_bytes = m.arena_used_bytes(ArenaPurpose::Scratch);
  r->arena_kv_cache_bytes = m.arena_used_bytes(ArenaPurpose::KvCache);
  r->arena_sampler_bytes = m.arena_used_bytes(ArenaPurpose::Sampler);
  r->arena_other_bytes = m.arena_used_bytes(ArenaPurpose::Other);
  r->context_tokens = plan.context_tokens;
  r->batch_tokens = plan.batch_tokens;
  r->budget_bytes = m.budget_bytes();
  r->kv_bytes_per_token = plan.kv_bytes_per_token;
  r->kv_compressed = plan.kv_compressed ? 1 : 0;
  r->kv_evicting = plan.kv_evicting ? 1 : 0;
  std::snprintf(r->kv_mode, sizeof r->kv_mode, "%s", m.kv_mode());
  r->sessions = plan.sessions;
  r->sessions_in_use = m.sessions_in_use();
  r->session_bytes = plan.session_bytes;
  return TERN_OK;
}

tern_status tern_tokenize(tern_model* model, const char* text, size_t text_size, int add_bos, int parse_special,
                          int32_t* out_tokens, size_t capacity, size_t* out_count) {
  TERN_C_REQUIRE_(model);
  TERN_C_REQUIRE_(out_count);
  *out_count = 0;
  if (text == nullptr && text_size != 0) return null_argument(__func__, "text");
  if (out_tokens == nullptr && capacity != 0) return null_argument(__func__, "out_tokens");
  Tokenizer* t = as_model(model)->tokenizer();
  if (t == nullptr) return status(fail(Error::InvalidState, "tern_tokenize: the model has no tokenizer"));
  size_t needed = 0;
  auto n = as_model(model)->encode(text == nullptr ? "" : text, text_size, add_bos != 0, parse_special != 0, out_tokens,
                                   capacity, &needed);
  if (!n.ok()) {
    *out_count = needed;
    return status(n.error());
  }
  *out_count = *n;
  return TERN_OK;
}

tern_status tern_detokenize(const tern_model* model, const int32_t* tokens, size_t count, char* out_text,
                            size_t capacity, size_t* out_size) {
  TERN_C_REQUIRE_(model);
  TERN_C_REQUIRE_(out_text);
  TERN_C_REQUIRE_(out_size);
  *out_size = 0;
  if (tokens == nullptr && count != 0) return null_argument(__func__, "tokens");
  if (capacity == 0) return status(fail(Error::OutOfRange, "tern_detokenize: no room for the NUL"));
  out_text[0] = '\0';
  const Tokenizer* t = as_model(model)->tokenizer();
  if (t == nullptr) return status(fail(Error::InvalidState, "tern_detokenize: the model has no tokenizer"));
  TokenDecoder decoder(*t);
  size_t used = 0;
  for (size_t i = 0; i <= count; ++i) {
    auto n = i < count ? decoder.push(tokens[i], out_text + used, capacity - 1 - used)
                       : decoder.flush(out_text + used, capacity - 1 - used);
    if (!n.ok()) {
      out_text[used] = '\0';
      *out_size = used;
      return status(n.error());
    }
    used += *n;
  }
  out_text[used] = '\0';
  *out_size = used;
  return TERN_OK;
}

tern_status tern_session_create(tern_model* model, const tern_session_params* params, tern_session** out_session) {
  TERN_C_REQUIRE_(out_session);
  *out_session = nullptr;
  TERN_C_REQUIRE_(model);
  const tern_session_params p = params != nullptr ? *params : tern_session_default_params();
  auto session = as_model(model)->create_session(to_cpp(p.sampler));
  if (!session.ok()) return status(session.error());
  Error e = (*session)->set_draft_tokens(p.n_draft);
  if (e == Error::Ok && p.draft_model != nullptr) e = (*session)->set_draft_model(as_model(p.draft_model));
  if (e == Error::Ok && p.grammar != nullptr) e = (*session)->set_grammar(p.grammar, std::strlen(p.grammar));
  if (e != Error::Ok) {
    as_model(model)->destroy_session(*session);
    return status(e);
  }
  *out_session = reinterpret_cast<tern_session*>(*session);
  return TERN_OK;
}

void tern_session_free(tern_session* session) {
  if (session == nullptr) return;
  Session* s = as_session(session);
  s->model().destroy_session(s);
}

tern_status tern_session_reset(tern_session* session) {
  TERN_C_REQUIRE_(session);
  as_session(session)->reset();
  return TERN_OK;
}

tern_status tern_session_set_draft(tern_session* session, uint32_t n_draft) {
  TERN_C_REQUIRE_(session);
  return status(as_session(session)->set_draft_tokens(n_draft));
}

tern_status tern_session_set_draft_model(tern_session* session, tern_model* draft_model) {
  TERN_C_REQUIRE_(session);
  return status(as_session(session)->set_draft_model(draft_model != nullptr ? as_model(draft_model) : nullptr));
}

tern_status tern_session_set_sampler(tern_session* session, const tern_sampler_params* params) {
  TERN_C_REQUIRE_(session);
  TERN_C_REQUIRE_(params);
  return status(as_session(session)->set_sampler(to_cpp(*params)));
}

tern_status tern_session_position(const tern_session* session, uint32_t* out_position) {
  TERN_C_REQUIRE_(session);
  TERN_C_REQUIRE_(out_position);
  *out_position = as_session(session)->position();
  return TERN_OK;
}

tern_status tern_prefill(tern_session* session, const int32_t* tokens, size_t count) {
  TERN_C_REQUIRE_(session);
  if (tokens == nullptr && count != 0) return null_argument(__func__, "tokens");
  return status(as_session(session)->prefill(tokens, count));
}

tern_status tern_decode(tern_session* session, int32_t token) {
  TERN_C_REQUIRE_(session);
  return status(as_session(session)->decode(token));
}

tern_status tern_get_logits(const tern_session* session, const float** out_logits, size_t* out_vocab_size) {
  TERN_C_REQUIRE_(session);
  TERN_C_REQUIRE_(out_logits);
  const Session* s = as_session(session);
  *out_logits = s->logits();
  if (out_vocab_size != nullptr) *out_vocab_size = s->model().config().vocab;
  if (*out_logits == nullptr) return status(fail(Error::InvalidState, "no logits before a prefill or decode"));
  return TERN_OK;
}

tern_status tern_sample(tern_session* session, int32_t* out_token) {
  return tern_sample_logprobs(session, 0, out_token, nullptr, nullptr, nullptr);
}

tern_status tern_sample_logprobs(tern_session* session, uint32_t top_n, int32_t* out_token,
                                 tern_token_logprob* out_chosen, tern_token_logprob* out_top, size_t* out_n_top) {
  TERN_C_REQUIRE_(session);
  TERN_C_REQUIRE_(out_token);
  if (top_n > 0) TERN_C_REQUIRE_(out_top);
  if (top_n > kMaxTopLogprobs) return status(fail(Error::InvalidArgument, "top_n %u (at most 20)", top_n));
  Session* s = as_session(session);
  TokenLogprobs lp;
  lp.top_n = top_n;
  auto token = s->sample(out_chosen != nullptr ? &lp : nullptr);
  if (!token.ok()) return status(token.error());
  *out_token = *token;
  for (uint32_t k = 0; out_chosen != nullptr && k <= lp.n_top; ++k) {  // the chosen token, then the others
    const TokenLogprob e = k == 0 ? TokenLogprob{*token, lp.logprob} : lp.top[k - 1];
    const PieceView text = s->token_text(e.token);
    (k == 0 ? *out_chosen : out_top[k - 1]) = tern_token_logprob{e.token, e.logprob, text.data, text.size};
  }
  if (out_n_top != nullptr) *out_n_top = out_chosen != nullptr ? lp.n_top : 0;
  return TERN_OK;
}

tern_status tern_generate(tern_session* session, const char* prompt, size_t prompt_size,
                          const tern_generate_params* params, tern_piece_callback callback, void* user_data,
                          tern_generate_stats* out_stats) {
  TERN_C_REQUIRE_(session);
  if (prompt == nullptr && prompt_size != 0) return null_argument(__func__, "prompt");
  const tern_generate_params p = params != nullptr ? *params : tern_generate_default_params();
  GenerateOptions o;
  o.max_new_tokens = p.max_new_tokens;
  o.add_bos = p.add_bos != 0;
  o.parse_special = p.parse_special != 0;
  o.stop_strings = p.stop_strings;
  o.stop_string_count = p.n_stop_strings;
  CallbackAdapter adapter{callback, user_data};
  GenerateStats st;
  const Error e = as_session(session)->generate(prompt == nullptr ? "" : prompt, prompt_size, o,
                                                callback != nullptr ? &CallbackAdapter::call : nullptr, &adapter, &st);
  if (out_stats != nullptr) {
    out_stats->prompt_tokens = st.prompt_tokens;
    out_stats->generated_tokens = st.generated_tokens;
    out_stats->decoded_tokens = st.decoded_tokens;
    out_stats->prefill_seconds = st.prefill_seconds;
    out_stats->decode_seconds = st.decode_seconds;
    out_stats->stop_reason = static_cast<tern_stop_reason>(static_cast<int>(st.stop_reason));
    out_stats->drafted_tokens = st.drafted_tokens;
    out_stats->accepted_tokens = st.accepted_tokens;
    out_stats->verify_steps = st.verify_steps;
  }
  return status(e);
}

tern_embed_params tern_embed_default_params(void) {
  tern_embed_params p;
  std::memset(&p, 0, sizeof p);
  p.format = TERN_EMBED_FLOAT32;
  return p;
}

size_t tern_embed_row_bytes(tern_embed_format format, uint32_t dimensions) {
  return embed_row_bytes(static_cast<EmbedFormat>(format), dimensions);
}

tern_status tern_model_get_embedding_info(const tern_model* model, tern_embedding_info* out_info) {
  TERN_C_REQUIRE_(model);
  TERN_C_REQUIRE_(out_info);
  const Model& m = *as_model(model);
  const ModelConfig& c = m.config();
  std::memset(out_info, 0, sizeof *out_info);
  if (!c.embedding) return TERN_OK;
  out_info->dimensions = c.hidden;
  out_info->pooling = static_cast<tern_pooling>(static_cast<int>(c.pooling));
  out_info->normalized = c.embedding_normalize ? 1 : 0;
  const schema::Embedding* e = m.bundle() != nullptr ? m.bundle()->embedding() : nullptr;
  if (e != nullptr && e->prompts() != nullptr) out_info->n_prompts = e->prompts()->size();
  if (e != nullptr && e->default_prompt() != nullptr && e->default_prompt()->size() > 0) {
    out_info->default_prompt = e->default_prompt()->c_str();
  }
  return TERN_OK;
}

tern_status tern_model_embedding_prompt(const tern_model* model, size_t index, const char** out_name,
                                        const char** out_text) {
  TERN_C_REQUIRE_(model);
  TERN_C_REQUIRE_(out_name);
  TERN_C_REQUIRE_(out_text);
  const Model& m = *as_model(model);
  const schema::Embedding* e = m.bundle() != nullptr ? m.bundle()->embedding() : nullptr;
  const size_t n = e != nullptr && e->prompts() != nullptr ? e->prompts()->size() : 0;
  if (index >= n) {
    return status(fail(Error::OutOfRange, "prompt %zu of %zu stored in the model", index, n));
  }
  const schema::EmbeddingPrompt* p = e->prompts()->Get(static_cast<flatbuffers::uoffset_t>(index));
  *out_name = p->name() != nullptr ? p->name()->c_str() : "";
  *out_text = p->text() != nullptr ? p->text()->c_str() : "";
  return TERN_OK;
}

namespace {

tern_status embed_inputs(tern_session* session, const EmbedInputs& inputs, const tern_embed_params* params, void* out,
                         size_t out_bytes, float* out_scales, tern_embed_stats* out_stats) {
  const tern_embed_params p = params != nullptr ? *params : tern_embed_default_params();
  EmbedOptions o;
  o.dimensions = p.dimensions;
  o.format = static_cast<EmbedFormat>(p.format);
  o.prompt_name = p.prompt_name;
  o.instruction = p.instruction;
  o.truncate = p.truncate != 0;
  EmbedStats st;
  const Error e = as_session(session)->embed(inputs, o, out, out_bytes, out_scales, &st);
  if (out_stats != nullptr) *out_stats = {st.texts, st.tokens, st.batches, st.truncated, st.seconds};
  return status(e);
}

}  // namespace

tern_status tern_embed(tern_session* session, const char* const* texts, const size_t* text_sizes, size_t n_texts,
                       const tern_embed_params* params, void* out, size_t out_bytes, float* out_scales,
                       tern_embed_stats* out_stats) {
  TERN_C_REQUIRE_(session);
  if (texts == nullptr && n_texts != 0) return null_argument(__func__, "texts");
  return embed_inputs(session, EmbedInputs::of_texts(texts, text_sizes, n_texts), params, out, out_bytes, out_scales,
                      out_stats);
}

tern_status tern_embed_tokens(tern_session* session, const int32_t* const* tokens, const size_t* n_tokens,
                              size_t n_inputs, const tern_embed_params* params, void* out, size_t out_bytes,
                              float* out_scales, tern_embed_stats* out_stats) {
  TERN_C_REQUIRE_(session);
  if ((tokens == nullptr || n_tokens == nullptr) && n_inputs != 0) return null_argument(__func__, "tokens");
  return embed_inputs(session, EmbedInputs::of_tokens(tokens, n_tokens, n_inputs), params, out, out_bytes, out_scales,
                      out_stats);
}

tern_status tern_bundle_verify(const char* bundle_path, int require_checksum, int* out_recorded) {
  TERN_C_REQUIRE_(bundle_path);
  if (out_recorded != nullptr) *out_recorded = 0;
  auto opened = Bundle::open(bundle_path);
  if (!opened.ok()) return status(opened.error());
  BundleChecksum checksum;
  const Error e = opened->verify_checksum(bundle_path, &checksum);
  if (out_recorded != nullptr) *out_recorded = checksum.recorded ? 1 : 0;
  if (e == Error::Ok && !checksum.recorded && require_checksum != 0) {
    return status(
        fail(Error::NotFound, "%s: no checksum recorded (converted before checksums were written)", bundle_path));
  }
  return status(e);
}

tern_status tern_plan(const char* bundle_path, const tern_model_params* params, const char* const* kv_modes,
                      size_t n_kv_modes, tern_plan_row* rows, size_t capacity, size_t* out_count) {
  TERN_C_REQUIRE_(bundle_path);
  TERN_C_REQUIRE_(out_count);
  *out_count = 0;
  if (rows == nullptr && capacity != 0) return null_argument(__func__, "rows");
  if (kv_modes == nullptr && n_kv_modes != 0) return null_argument(__func__, "kv_modes");
  const tern_model_params given = params != nullptr ? *params : tern_model_default_params();
  ModelParams base;
  if (const tern_status s = to_cpp(given, __func__, &base); s != TERN_OK) return s;
  auto opened = Bundle::open(bundle_path);
  if (!opened.ok()) return status(opened.error());
  const Bundle& bundle = *opened;
  // The modes: the caller's, or the standard set plus every calibrated average, found by
  // asking kv_profile_for_average (the one definition of what adaptive:B means) at B in
  // steps of 1/8.
  constexpr size_t kMaxModes = 64;
  char names[kMaxModes][32];
  size_t n = 0;
  if (kv_modes != nullptr) {
    for (size_t i = 0; i < n_kv_modes && n < kMaxModes; ++i) {
      if (kv_modes[i] == nullptr) return null_argument(__func__, "kv_modes[i]");
      std::snprintf(names[n++], sizeof names[0], "%s", kv_modes[i]);
    }
  } else {
    for (const char* m : {"fp16", "q8", "q4", "q2"}) std::snprintf(names[n++], sizeof names[0], "%s", m);
    if (const schema::KvProfile* profile = bundle.kv_profile(); profile != nullptr) {
      const ModelConfig& c = bundle.config();
      std::unique_ptr<KvHeadBits[]> bits(new (std::nothrow) KvHeadBits[static_cast<size_t>(c.layers) * c.kv_heads]);
      if (bits == nullptr) return status(fail(Error::OutOfMemory, "tern_plan: KV head table"));
      for (int eighth = 16; eighth <= 64 && n < kMaxModes; ++eighth) {
        const float b = static_cast<float>(eighth) / 8.0f;
        KvCacheProfile out;
        if (kv_profile_for_average(profile, kv_shape_of(c), b, bits.get(), &out) == Error::Ok) {
          std::snprintf(names[n++], sizeof names[0], "adaptive:%g", static_cast<double>(b));
        }
      }
    }
  }
  *out_count = n;
  char last_message[512] = "";
  for (size_t i = 0; i < n && i < capacity; ++i) {
    tern_plan_row& row = rows[i];
    std::memset(&row, 0, sizeof row);
    static_assert(sizeof row.kv_mode == sizeof names[0], "mode name size");
    std::memcpy(row.kv_mode, names[i], sizeof row.kv_mode);
    ModelParams p = base;
    p.kv_mode = names[i];
    auto plan = plan_model(bundle, p);
    row.status = status(plan.ok() ? Error::Ok : plan.error());
    if (!plan.ok()) {
      std::snprintf(last_message, sizeof last_message, "%.31s: %.400s", names[i], last_error_message());
      // A budget too small for the smallest cache still reports what that needs.
      if (plan.error() == Error::BudgetTooSmall) {
        p.memory_budget_bytes = 0;
        p.context_tokens = 0;  // minimum_budget_bytes does not depend on the context asked for
        if (auto least = plan_model(bundle, p); least.ok()) {
          row.minimum_budget_bytes = least->minimum_budget_bytes;
          row.kv_bytes_per_token = least->kv_bytes_per_token;
          row.weights_bytes = least->resident_weight_bytes + least->anonymous_weight_bytes;
          row.process_overhead_bytes = least->overhead_bytes;
        }
      }
      continue;
    }
    const MemoryPlan& m = *plan;
    if (kv_mode_is_auto(names[i])) std::memcpy(row.kv_mode, m.kv_mode, sizeof row.kv_mode);  // what auto chose
    row.context_tokens = m.context_tokens;
    row.kv_bytes_per_token = m.kv_bytes_per_token;
    row.weights_bytes = m.resident_weight_bytes + m.anonymous_weight_bytes;
    row.process_overhead_bytes = m.overhead_bytes;
    row.arena_bytes = m.arena_bytes;
    row.scratch_bytes = m.scratch_bytes;
    row.kv_bytes = m.kv_bytes;
    row.total_bytes = m.total_bytes;
    row.minimum_budget_bytes = m.minimum_budget_bytes;
    row.session_bytes = m.session_bytes;
    row.sessions_that_fit = p.memory_budget_bytes > 0 ? sessions_that_fit(m, p.memory_budget_bytes) : m.sessions;
  }
  if (last_message[0] != '\0') (void)fail(Error::Ok, "%.500s", last_message);
  if (capacity < n) {
    return status(fail(Error::OutOfRange, "tern_plan: %zu modes, room for %zu rows", n, capacity));
  }
  return TERN_OK;
}

tern_status tern_chat_apply(const tern_model* model, const tern_chat_message* messages, size_t n_messages,
                            int add_assistant_prefix, char* buf, size_t capacity, size_t* out_size) {
  TERN_C_REQUIRE_(model);
  TERN_C_REQUIRE_(out_size);
  *out_size = 0;
  if (messages == nullptr && n_messages != 0) return null_argument(__func__, "messages");
  if (buf == nullptr && capacity != 0) return null_argument(__func__, "buf");
  const Model& m = *as_model(model);
  static_assert(sizeof(tern_chat_message) == sizeof(ChatMessage), "chat message layout");
  return status(render_chat(m.chat_format(), m.tokenizer(), reinterpret_cast<const ChatMessage*>(messages), n_messages,
                            add_assistant_prefix != 0, buf, capacity, out_size));
}

tern_status tern_session_state_size(const tern_session* session, size_t* out_size) {
  TERN_C_REQUIRE_(session);
  TERN_C_REQUIRE_(out_size);
  *out_size = as_session(session)->state_size();
  return TERN_OK;
}

tern_status tern_session_state_save(const tern_session* session, void* buf, size_t capacity, size_t* out_size) {
  TERN_C_REQUIRE_(session);
  TERN_C_REQUIRE_(out_size);
  if (buf == nullptr && capacity != 0) return null_argument(__func__, "buf");
  *out_size = as_session(session)->state_size();
  auto saved = as_session(session)->save_state(buf, capacity);
  if (!saved.ok()) return status(saved.error());
  *out_size = *saved;
  return TERN_OK;
}

tern_status tern_session_state_load(tern_session* session, const void* buf, size_t size) {
  TERN_C_REQUIRE_(session);
  TERN_C_REQUIRE_(buf);
  return status(as_session(session)->load_state(buf, size));
}

tern_status tern_session_state_save_file(const tern_session* session, const char* path) {
  TERN_C_REQUIRE_(session);
  TERN_C_REQUIRE_(path);
  return status(save_state_file(*as_session(session), path));
}

tern_status tern_session_state_load_file(tern_session* session, const char* path) {
  TERN_C_REQUIRE_(session);
  TERN_C_REQUIRE_(path);
  auto mapped = MappedFile::open(path, MapMode::Auto);
  if (!mapped.ok()) return status(mapped.error());
  return status(as_session(session)->load_state(mapped->data(), mapped->size()));
}

tern_status tern_session_history(const tern_session* session, int32_t* out_tokens, size_t capacity, size_t* out_count) {
  TERN_C_REQUIRE_(session);
  TERN_C_REQUIRE_(out_count);
  if (out_tokens == nullptr && capacity != 0) return null_argument(__func__, "out_tokens");
  const Session* s = as_session(session);
  const size_t n = s->history_size();
  *out_count = n;
  const size_t keep = n < capacity ? n : capacity;
  if (keep > 0) std::memcpy(out_tokens, s->history() + (n - keep), keep * sizeof(int32_t));
  if (capacity < n) {
    return status(fail(Error::OutOfRange, "tern_session_history: %zu tokens, room for %zu", n, capacity));
  }
  return TERN_OK;
}

tern_status tern_session_truncate(tern_session* session, uint32_t n_tokens) {
  TERN_C_REQUIRE_(session);
  return status(as_session(session)->truncate(n_tokens));
}

tern_status tern_session_set_logit_bias(tern_session* session, const tern_logit_bias* entries, size_t n_entries) {
  TERN_C_REQUIRE_(session);
  if (entries == nullptr && n_entries != 0) return null_argument(__func__, "entries");
  static_assert(sizeof(tern_logit_bias) == sizeof(Session::LogitBias), "logit bias layout");
  return status(as_session(session)->set_logit_bias(reinterpret_cast<const Session::LogitBias*>(entries), n_entries));
}

tern_status tern_session_set_logit_hook(tern_session* session, tern_logit_hook hook, void* user_data) {
  TERN_C_REQUIRE_(session);
  as_session(session)->set_logit_hook(hook, user_data);
  return TERN_OK;
}

tern_status tern_session_set_grammar(tern_session* session, const char* grammar, size_t size) {
  TERN_C_REQUIRE_(session);
  return status(as_session(session)->set_grammar(grammar, size));
}

tern_status tern_json_schema_to_grammar(const char* schema, size_t size, char* buf, size_t capacity, size_t* out_size) {
  TERN_C_REQUIRE_(out_size);
  if (schema == nullptr && size != 0) return null_argument(__func__, "schema");
  return status(json_schema_to_grammar(schema, size, buf, capacity, out_size));
}

tern_status tern_available_memory(uint64_t* out_bytes) {
  TERN_C_REQUIRE_(out_bytes);
  *out_bytes = 0;
  auto bytes = available_memory();
  if (!bytes.ok()) return status(bytes.error());
  *out_bytes = *bytes;
  return TERN_OK;
}

tern_status tern_parse_memory_budget(const char* text, uint64_t* out_bytes) {
  TERN_C_REQUIRE_(text);
  TERN_C_REQUIRE_(out_bytes);
  *out_bytes = 0;
  if (std::strncmp(text, "available", 9) != 0) return tern_parse_byte_size(text, out_bytes);
  const char* rest = text + 9;
  double margin = 0.0;
  if (*rest == '-') {
    // Digits and at most one '.': no sign, space, hex or exponent that strtod would take.
    const char* digits = rest + 1;
    const size_t n = std::strspn(digits, "0123456789.");
    const char* dot = std::strchr(digits, '.');
    const bool plain =
        n > 0 && digits[0] != '.' && (dot == nullptr || (dot < digits + n - 1 && std::strchr(dot + 1, '.') == nullptr));
    char* end = nullptr;
    margin = plain ? std::strtod(digits, &end) : -1.0;
    if (!plain || end != digits + n || std::strcmp(end, "%") != 0 || !(margin >= 0.0 && margin < 100.0)) {
      return status(fail(Error::InvalidArgument, "'%s': write available-P%% with 0 <= P < 100", text));
    }
  } else if (*rest != '\0') {
    return status(
        fail(Error::InvalidArgument, "'%s' is not a memory budget (a size like 512M, or available[-P%%])", text));
  }
  uint64_t available = 0;
  if (const tern_status s = tern_available_memory(&available); s != TERN_OK) return s;
  *out_bytes = static_cast<uint64_t>(static_cast<double>(available) * (1.0 - margin / 100.0));
  return TERN_OK;
}

tern_status tern_session_request_abort(tern_session* session) {
  TERN_C_REQUIRE_(session);
  as_session(session)->request_abort();
  return TERN_OK;
}

tern_status tern_session_clear_abort(tern_session* session) {
  TERN_C_REQUIRE_(session);
  as_session(session)->clear_abort();
  return TERN_OK;
}

}  // extern "C"
