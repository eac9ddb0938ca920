// Where every byte goes, decided once at load from the caller's budget:
//   budget >= process overhead + resident weights + anonymous weights + arena
//   arena   = converted weights + tokenizer + sessions x (scratch + sampler + KV)
// Every session the model can hold at once has its own slot of the same size, so they run
// concurrently without sharing anything but the weights.
// The KV cache gets whatever is left, capped at the model's context. The cache is sized with
// its exact byte function (kv_cache_arena_bytes) and its context is always a capacity it can
// have (runtime/kv/kv_cache_spec.h: any count for a dense cache, S + M*G + W + G positions
// for a compressed one).
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/error.h"
#include "runtime/kv/kv_cache_spec.h"
#include "runtime/model/model_config.h"

namespace tern {

// What the process needs besides the plan: code, stacks, libc and thread pool state. An
// allowance, not a measurement: tern-run's peak RSS on x86-64 Linux exceeded mapped
// weights + arena by about 1 MiB, so 8 MiB leaves room for bigger binaries and stacks.
inline constexpr size_t kProcessOverheadBytes = size_t{8} << 20;
// Bytes the model keeps per session slot (its arena bookkeeping and the session pointer).
inline constexpr size_t kSessionSlotBytes = 192;
// The smallest context a model is loaded with; below this the budget is refused.
inline constexpr uint32_t kMinContextTokens = 16;
// Most drafted tokens one speculative step verifies (with the token before them, a batch
// that always fits the smallest context).
inline constexpr uint32_t kMaxDraftTokens = kMinContextTokens - 1;
// The context a model gets when the caller gives neither a context nor a budget, if its own
// is longer: a generative model's (a long conversation; llama.cpp's and Ollama's default, and
// BitNet b1.58 2B-4T's whole context), and an embedding model's (the longest input OpenAI's
// embeddings take, 8,191 tokens, and Qwen3-Embedding's own examples). Fixed numbers, not the
// machine's memory: a plan made on a workstation is the plan the phone makes.
inline constexpr uint32_t kDefaultContextTokens = 4096;
inline constexpr uint32_t kDefaultEmbeddingContextTokens = 8192;
// ModelParams::grammar_bytes "auto": auto_grammar_bytes() of the model's vocabulary.
inline constexpr size_t kGrammarBytesAuto = SIZE_MAX;

struct MemoryPlanRequest {
  ModelConfig config;
  uint64_t budget_bytes = 0;          // 0: no limit (context = requested or the model's)
  size_t resident_weight_bytes = 0;   // mmap'd bundle bytes that become resident when touched
  size_t anonymous_weight_bytes = 0;  // the bundle copied into anonymous memory (weights_pages "copy")
  size_t arena_weight_bytes = 0;      // weights converted into the arena (e.g. bf16 norms -> f32)
  size_t tokenizer_bytes = 0;
  uint32_t batch_tokens = 64;                // prefill batch
  uint32_t context_request = 0;              // 0: as many as fit, up to the model's
  bool context_exact = false;                // context_request is a contract: BudgetTooSmall, never fewer positions
  uint32_t sessions = 1;                     // session slots, each with the planned context
  uint32_t min_context = kMinContextTokens;  // dense caches; a compressed one's least is S + W + G
  const KvCacheSpec* kv = nullptr;           // required
  uint32_t draft_tokens = 0;                 // speculative decoding: drafted tokens one step may verify (0: off)
  size_t grammar_bytes = 0;                  // per session: a compiled grammar and its parse stacks (0: none)
};

struct MemoryPlan {
  size_t overhead_bytes = 0;
  size_t resident_weight_bytes = 0;
  // The bundle's bytes in anonymous memory (weights_pages "copy": the same bytes as its mapping,
  // but not reclaimable like file pages, nor shared with another process mapping the bundle).
  size_t anonymous_weight_bytes = 0;
  size_t arena_weight_bytes = 0;
  size_t tokenizer_bytes = 0;
  // One session's parts (every slot is the same).
  size_t scratch_bytes = 0;  // activations, attention rows, logits, token history
  size_t sampler_bytes = 0;
  size_t kv_bytes = 0;
  size_t session_bytes = 0;         // one slot: the session object, scratch, sampler and KV, aligned
  uint32_t sessions = 1;            // slots
  size_t arena_bytes = 0;           // the one allocation: converted weights + tokenizer + slot table + slots
  size_t total_bytes = 0;           // overhead + resident and anonymous weights + arena
  size_t minimum_budget_bytes = 0;  // total at min_context
  uint32_t context_tokens = 0;      // positions the KV cache holds (with eviction: resident at once)
  uint32_t batch_tokens = 0;
  uint32_t draft_tokens = 0;      // room for this many drafted tokens per verification step
  size_t grammar_bytes = 0;       // per session, inside sampler_bytes: room for a grammar
  double kv_bytes_per_token = 0;  // marginal KV bytes per position (all layers and heads)
  bool kv_compressed = false;
  bool kv_evicting = false;  // positions may exceed context_tokens (StreamingLLM eviction)
  char kv_mode[32] = "";     // the planned cache's mode (the one "auto" chose)
};

// Sessions of `context` tokens that fit in `budget` beside the rest of `plan` (its weights,
// tokenizer and overhead): what "how many sessions fit" asks. 0 if not one.
uint32_t sessions_that_fit(const MemoryPlan& plan, uint64_t budget);

// Bytes the model's arena takes for its slot table of `sessions` entries.
size_t session_table_bytes(uint32_t sessions);

// Arena bytes of one session (scratch + sampler + KV + bookkeeping) for `context` tokens, as
// runtime/engine/session_layout.h lays them out. `draft_tokens` > 0 adds what verifying that
// many drafted tokens needs; `grammar_bytes` the session's grammar memory (counted with the sampler).
size_t session_arena_bytes(const ModelConfig& config, uint32_t batch, uint32_t context, const KvCacheSpec& kv,
                           size_t* scratch_bytes, size_t* sampler_bytes, size_t* kv_bytes, uint32_t draft_tokens = 0,
                           size_t grammar_bytes = 0);

// BudgetTooSmall (message states the minimum) when the budget cannot hold min_context, or
// (context_exact) the context asked for (the message says what that needs).
Result<MemoryPlan> plan_memory(const MemoryPlanRequest& request);

// kv_mode "auto": of kv_auto_candidates (runtime/kv/kv_cache_spec.h), the one with the
// least estimated KL (ties: fewer KV bytes per token) that holds the context asked for
// (context_request, 0: the model's) within the budget, i.e. gets the same context as with
// no budget at all; without calibration estimates, the one with the most bits per element
// that does. `request` is `base` without its kv (filled here); `kv` is the caller's KV
// request (its mode is ignored); `bits` has layers * kv_heads entries and `spec` gets the
// chosen mode's spec (spec->name its name). BudgetTooSmall, naming the context each
// candidate would get, when none holds it.
Result<MemoryPlan> plan_memory_auto(const MemoryPlanRequest& base, const KvModeRequest& kv,
                                    const schema::KvProfile* calibrated, KvHeadBits* bits, KvCacheSpec* spec);

// The context a load plans for when the caller asks for `context_request` tokens (0: none
// asked) within `budget_bytes` (0: none): what was asked; with a budget and nothing asked, 0
// (as many as fit, up to the model's); with neither, the model's context capped at
// kDefaultContextTokens (embedding models: kDefaultEmbeddingContextTokens).
uint32_t default_context_request(const ModelConfig& config, uint64_t budget_bytes, uint32_t context_request);

// Grammar memory "auto" for a vocabulary of `vocab_tokens` token ids: 2 MiB + 48 bytes a
// token, in whole 64 KiB. A compile needs about 1.25 MiB + 20 bytes a token for a generic JSON
// grammar and 1.35 MiB + 29 bytes a token for a tool call's (its parse stacks are fixed, its
// walk and masks grow with the vocabulary; tern-grammar-compile-bench, 2,048 and 128,256
// tokens); the rest is room for larger schemas and the JSON Schema converter's tables
// (about 0.5 MB). 0 tokens (no tokenizer, or an embedding model): 0.
size_t auto_grammar_bytes(uint32_t vocab_tokens);

// Parses "512M", "1.5G", "4096K", "123456" (bytes; K/M/G/T are powers of 1024): digits, at
// most six decimals, a unit, and a whole number of bytes in all. No sign, hex, exponent or
// fraction of a byte ("0.5", "1e-9", "-0", "0x0" are InvalidArgument, not 0 = unlimited).
Result<uint64_t> parse_byte_size(const char* text);

}  // namespace tern
