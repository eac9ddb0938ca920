// A loaded model: verified weights (views into the mmap'd bundle), kernels checked once,
// the memory plan, the thread pool, and the one arena every session lives in.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "kernels/ternary_matmul.h"
#include "platform/error.h"
#include "platform/file_map.h"
#include "platform/thread_pool.h"
#include "runtime/base/arena.h"
#include "runtime/engine/forward_queue.h"
#include "runtime/engine/memory_plan.h"
#include "runtime/engine/sampler.h"
#include "runtime/kv/kv_cache_spec.h"
#include "runtime/model/model_config.h"
#include "runtime/model/model_family.h"
#include "runtime/structured/grammar.h"
#include "runtime/text/chat.h"
#include "runtime/text/tokenizer.h"

namespace tern {

class Bundle;
class Session;
namespace schema {
struct KvProfile;
}

// How the weights' memory is paged (ModelParams::weights_pages). Decode reads every weight once a
// token; in 4 KiB pages that is a TLB miss every 4 KiB, in 2 MiB pages almost none.
enum class WeightPages : uint8_t {
  Auto,  // the bundle's mapping in large pages where the kernel gives them, without more memory
  Map,   // the bundle's mapping, read on first use in the pages the page cache has
  Copy,  // an anonymous copy of the bundle in large pages, in place of its mapping
};
// "auto" (also null or ""), "map", "copy"; InvalidArgument naming them otherwise.
Result<WeightPages> parse_weights_pages(const char* text);
const char* to_string(WeightPages pages);

// The weights' pages: what the load asked for and did, and the kernel's count now.
struct WeightPagesReport {
  WeightPages mode = WeightPages::Map;
  LargePages load = LargePages::NotTried;  // what loading did to get large pages
  bool mapped = false;                     // false: no bundle, or read into the heap (no mmap)
  bool anonymous = false;                  // the copy (mode Copy) rather than the file's pages
  size_t bytes = 0;                        // the bundle file, or its copy
  size_t large_page_bytes = 0;             // the kernel's large page; 0: none
  PageUsage usage;                         // resident and in large pages now (usage.known: Linux)
};

struct ModelParams {
  uint64_t memory_budget_bytes = 0;  // 0: no limit
  void* arena_buffer = nullptr;      // optional caller-owned arena; must hold plan().arena_bytes
  size_t arena_buffer_bytes = 0;
  uint32_t threads = 1;  // 0: one per available core; more than the cores is clamped
  // 0 with a budget: as many as it allows, up to the model's; 0 without one: the model's,
  // at most kDefaultContextTokens (embedding models: kDefaultEmbeddingContextTokens).
  uint32_t context_tokens = 0;
  uint32_t batch_tokens = 64;  // prefill batch
  uint32_t sessions = 1;       // sessions the model holds at once, each with its own slot (0: 1)
  // Deprecated: kv_mode "f32" / "fp16" say the same. F32 here, the engine's exact cache its
  // reference tests compare against; tern_model_default_params() gives apps F16.
  KvType kv_type = KvType::F32;
  // KV mode by parse_kv_mode name: "f32", "fp16" (dense, exact), "q8", "q4", "q3", "q2",
  // "k4v2" (compressed, every head alike), "adaptive:B" (the bundle's calibrated per-head
  // widths at B average bits); any compressed mode + ">A@N" (aging tiers: blocks more than N
  // tokens past the exact window truncated to at most A bits, e.g. "q4>2@96"). Null or
  // "": the dense kv_type cache (the default). Copied
  // at load; the string need not outlive the call.
  const char* kv_mode = nullptr;
  int32_t kv_sink_tokens = -1;    // -1: the mode's default (4; adaptive: the bundle's)
  int32_t kv_recent_window = -1;  // exact recent tokens; -1: the default (32; adaptive: the bundle's)
  // -1: on for compressed modes (q*, k*v*, adaptive), off for f32/fp16; 0: off (past the
  // capacity prefill/decode fail); 1: on (f32/fp16 then use a compressed cache of exact heads).
  int32_t kv_eviction = -1;
  // Speculative decoding: each session gets room to verify up to this many drafted tokens
  // per step (Session::set_draft_tokens; at most kMaxDraftTokens). 0: no drafting.
  uint32_t draft_tokens = 0;
  // Grammar-constrained sampling: each session's memory for a compiled grammar and its parse
  // stacks; with it the model builds the vocabulary's byte table grammars walk (shared). 0:
  // sessions cannot take a grammar. kGrammarBytesAuto (the default): auto_grammar_bytes() of
  // the vocabulary, none for an embedding model or one without a tokenizer.
  size_t grammar_bytes = kGrammarBytesAuto;
  // parse_weights_pages() names: null, "" or "auto" (the default): the bundle's mapping (advised
  // for large pages) is read in at load, and what the page cache held in small pages, as the
  // program that wrote the file leaves them, dropped and read again in large ones where the
  // kernel gives a file them (MappedFile::use_large_pages); no memory beyond the mapping's.
  // "map": the mapping alone, paged in on first use. "copy": an anonymous copy in large pages
  // replaces the mapping (the plan counts it as anonymous_weight_bytes; NotSupported without
  // transparent huge pages). Read at load.
  const char* weights_pages = nullptr;
};

// The KV fields of `params` as a request for make_kv_cache_spec.
KvModeRequest kv_mode_request(const ModelParams& params);

// What Model::load(bundle, params) would plan, without loading: no arena, no threads, no
// tokenizer tables; the same code computes both, so loading with a budget of
// plan.total_bytes gives a session of plan.context_tokens. Allocates only while it runs.
Result<MemoryPlan> plan_model(const Bundle& bundle, const ModelParams& params);

class Model {
 public:
  // Maps and verifies a bundle, then create().
  static Result<std::unique_ptr<Model>> load(const char* path, const ModelParams& params);
  // From weights already in memory (tests, embedders with their own storage).
  // `resident_weight_bytes` is what the weights occupy for the memory plan.
  static Result<std::unique_ptr<Model>> create(const ModelConfig& config, const ModelWeights& weights,
                                               const ModelParams& params, size_t resident_weight_bytes);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const LayerWeights& layer(uint32_t i) const { return layers_[i]; }
  const LayerRuntime& layer_runtime(uint32_t i) const { return layer_runtime_[i]; }
  const float* final_norm() const { return final_norm_; }
  const float* rope_inv_freq() const { return rope_inv_freq_; }
  // RoPE frequencies of sliding-window layers (rope_local_theta; == rope_inv_freq() without one).
  const float* rope_local_inv_freq() const { return rope_local_inv_freq_; }
  const MemoryPlan& plan() const { return plan_; }
  // The weights' pages now (reads /proc/self/smaps on Linux; no heap use).
  WeightPagesReport weights_pages() const;
  const ArenaAllocator& arena() const { return arena_; }
  const ThreadPool* pool() const { return pool_.num_threads() > 1 ? &pool_ : nullptr; }
  size_t threads() const { return pool_.num_threads(); }
  const Bundle* bundle() const { return bundle_.get(); }
  // The KV cache every session gets; its name is the resolved mode ("f32", "q4", "adaptive:2.5").
  const KvCacheSpec& kv_spec() const { return kv_spec_; }
  const char* kv_mode() const { return kv_spec_.name; }
  // What a saved session state must match: the bundle (0 without one) and the KV cache's
  // layout (spec and capacity).
  uint64_t bundle_identity() const { return bundle_identity_; }
  uint64_t kv_layout_identity() const { return kv_layout_identity_; }
  uint64_t budget_bytes() const { return params_.memory_budget_bytes; }
  // Null when the model was created from weights without a bundle.
  Tokenizer* tokenizer() { return has_tokenizer_ ? &tokenizer_ : nullptr; }
  const Tokenizer* tokenizer() const { return has_tokenizer_ ? &tokenizer_ : nullptr; }
  // Tokenizer::encode with the model's shared scratch, one caller at a time (sessions on
  // other threads tokenize through here). InvalidState without a tokenizer.
  Result<size_t> encode(const char* text, size_t len, bool add_bos, bool parse_special, int32_t* out, size_t capacity,
                        size_t* needed);
  // The bundle's chat template (Jinja text as shipped), or null.
  const char* chat_template() const;
  // How conversations are rendered (runtime/text/chat.h).
  const ChatFormatView& chat_format() const { return chat_format_; }
  // The vocabulary as grammars read it; built at load when the plan has grammar memory, else empty.
  const GrammarVocab& grammar_vocab() const { return grammar_vocab_; }

  // Up to plan().sessions sessions at once, each in its own slot of the arena (InvalidState,
  // saying so, when all are taken). Thread-safe: sessions may be created, used and destroyed
  // from different threads; one session is driven by one thread at a time.
  Result<Session*> create_session(const SamplerParams& sampler);
  void destroy_session(Session* session);
  // Grammars compiled by the sessions are shared: copies into `to`'s grammar memory a grammar
  // of exactly `text` that another session has compiled (no vocabulary walk), and says
  // whether there was one. Either way `to`'s grammar is not shared while it changes; the
  // session calls grammar_compiled() once its own compile is done.
  Result<bool> copy_shared_grammar(Session& to, const char* text, size_t size);
  void grammar_compiled(Session& session, bool ok);
  uint32_t sessions_in_use() const;
  // Where sessions' forward passes go: passes asked for at the same time run as one.
  ForwardQueue& forward_queue() const { return forward_queue_; }
  // Every byte in use in the arena: the model's part plus every slot's, by purpose.
  size_t arena_used_bytes() const;
  size_t arena_used_bytes(ArenaPurpose purpose) const;

 private:
  Model() = default;
  Error init(const ModelConfig& config, const ModelWeights& weights, const ModelParams& params,
             size_t resident_weight_bytes);
  // The bundle's pages as weights_pages_ asks, after init (the plan holds them).
  Error place_weights();
  friend class Session;

  ModelConfig config_;
  ModelParams params_;
  ModelWeights weights_;
  LayerWeights* layers_ = nullptr;
  LayerRuntime* layer_runtime_ = nullptr;
  const float* final_norm_ = nullptr;
  float* rope_inv_freq_ = nullptr;
  float* rope_local_inv_freq_ = nullptr;
  MemoryPlan plan_;
  ThreadPool pool_;
  std::unique_ptr<Bundle> bundle_;
  WeightPages weights_pages_ = WeightPages::Auto;
  LargePages weights_pages_load_ = LargePages::NotTried;
  void* owned_arena_ = nullptr;
  ArenaAllocator arena_;  // the model's part; the slots' regions are carved from it
  struct SessionSlot {
    ArenaAllocator arena;  // the slot's region
    Session* session = nullptr;
  };
  SessionSlot* slots_ = nullptr;  // plan_.sessions entries
  size_t slot_region_bytes_ = 0;  // all slot regions together, padding included
  mutable std::mutex slots_mutex_;
  std::mutex tokenizer_mutex_;  // the tokenizer's arena scratch is shared
  Tokenizer tokenizer_;
  bool has_tokenizer_ = false;
  GrammarVocab grammar_vocab_;
  bool kv_sink_reposition_ = true;
  KvCacheSpec kv_spec_;
  ChatFormatView chat_format_;
  uint64_t bundle_identity_ = 0;
  uint64_t kv_layout_identity_ = 0;
  std::unique_ptr<KvHeadBits[]> kv_bits_;  // per-head widths of adaptive modes (allocated at load)
  mutable ForwardQueue forward_queue_{*this};
};

// Checks a weight set against its config: shapes, layouts, presence of what the family needs.
Error validate_weights(const ModelConfig& config, const ModelWeights& weights);

}  // namespace tern
