/* SPDX-License-Identifier: MIT */
/* Tern: on-device inference for BitNet b1.58 (ternary) language models. Plain C API.
 *
 * Ownership
 *   - tern_model_load() returns a model the caller frees with tern_model_free(). The model
 *     maps the bundle file read-only (or copies it: weights_pages) and keeps it until freed.
 *     If the caller passes an arena buffer, it must stay valid until the model is freed.
 *   - tern_session_create() returns a session that lives inside the model's arena; free it
 *     with tern_session_free() before the model. A model has at most one session at a time
 *     (TERN_INVALID_STATE otherwise); tern_session_reset() starts a new conversation.
 *   - Pointers returned by the library (logits, strings) stay valid until the next call on
 *     the same object, unless stated otherwise.
 *
 * Memory
 *   The caller states memory_budget_bytes. Loading plans process overhead + resident
 *   weights + one arena (tokenizer, scratch, sampler, KV cache) to fit, gives the KV cache
 *   everything left (up to the model's context) and fails with TERN_BUDGET_TOO_SMALL, the
 *   message stating the minimum, when not even a minimal context fits. Without a budget the
 *   defaults plan a bounded amount: the model's context up to TERN_DEFAULT_N_CTX tokens, an
 *   fp16 cache and a grammar memory per session (tern_model_params). After load, prefill,
 *   decode, sample and generate allocate nothing. The plan is logged at TERN_LOG_DEBUG.
 *
 * Threads
 *   Functions on different models are independent. One model and its session must be used
 *   from one thread at a time, except tern_session_request_abort(), which any thread may
 *   call. tern_last_error_message() is per thread. tern_set_log_callback() must be called
 *   before other threads use the library.
 *
 * Errors
 *   Every fallible function returns a tern_status (TERN_OK == 0) whose values equal the C++
 *   tern::Error codes; tern_last_error_message() says what went wrong on this thread.
 *
 * Prompts longer than the context
 *   Never truncated: tern_prefill() and tern_generate() fail with TERN_PROMPT_TOO_LONG and
 *   run nothing; the message states the prompt's length and the free context. With KV
 *   eviction on (kv_eviction, default for the compressed kv_mode values) there is no such
 *   limit for tern_prefill() and generation: the cache keeps the sink tokens and the most
 *   recent ones and drops the oldest in between (StreamingLLM); tern_generate()'s prompt is
 *   still limited to the cache's capacity, its tokenizer buffer. */
#ifndef TERN_H_
#define TERN_H_

#include <stddef.h>
#include <stdint.h>

#include "tern_error_codes.h"

/* TERN_API marks the library's entry points: exported from a shared build (the rest of the
 * library stays hidden with -fvisibility=hidden), plain declarations in a static one. */
#if defined(_WIN32)
#if defined(TERN_BUILDING_SHARED)
#define TERN_API __declspec(dllexport)
#elif defined(TERN_USING_SHARED)
#define TERN_API __declspec(dllimport)
#else
#define TERN_API
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define TERN_API __attribute__((visibility("default")))
#else
#define TERN_API
#endif

/* TERN_DEPRECATED(msg) marks what still works but will go: the compiler says what to use. */
#if defined(__GNUC__) || defined(__clang__)
#define TERN_DEPRECATED(msg) __attribute__((deprecated(msg)))
#elif defined(_MSC_VER)
#define TERN_DEPRECATED(msg) __declspec(deprecated(msg))
#else
#define TERN_DEPRECATED(msg)
#endif
/* On struct fields. Not under clang in C++: it reports every implicit copy of the struct
 * (as `tern_model_params p = tern_model_default_params();` makes) as a use of the field. */
#if defined(__cplusplus) && defined(__clang__)
#define TERN_DEPRECATED_FIELD(msg)
#else
#define TERN_DEPRECATED_FIELD(msg) TERN_DEPRECATED(msg)
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tern_status {
#define TERN_C_STATUS_(name, cname, value, msg) TERN_##cname = value,
  TERN_ERROR_LIST(TERN_C_STATUS_)
#undef TERN_C_STATUS_
} tern_status;

typedef struct tern_model tern_model;
typedef struct tern_session tern_session;

typedef enum tern_kv_type { TERN_KV_F16 = 0, TERN_KV_F32 = 1 } tern_kv_type;

/* n_ctx 0 without a memory budget: the model's context, at most this many tokens (embedding
 * models: TERN_DEFAULT_EMBEDDING_N_CTX, the longest input OpenAI's embeddings take). */
#define TERN_DEFAULT_N_CTX 4096
#define TERN_DEFAULT_EMBEDDING_N_CTX 8192
/* grammar_bytes: as much as grammars over the model's vocabulary need (the default). */
#define TERN_GRAMMAR_BYTES_AUTO UINT64_MAX

typedef struct tern_model_params {
  uint64_t memory_budget_bytes; /* 0: no limit */
  void* arena_buffer;           /* optional caller-owned arena (64-byte aligned) */
  size_t arena_buffer_bytes;
  uint32_t n_threads; /* 0: one per available core; more is clamped to the cores (a
                         warning is logged, tern_model_info.n_threads says what runs) */
  /* Context tokens per session, honoured exactly (TERN_BUDGET_TOO_SMALL when the budget
   * cannot hold them). 0 with a budget: as many as it allows, up to the model's context. 0
   * without one (the default): the model's context, at most TERN_DEFAULT_N_CTX (4,096;
   * embedding models TERN_DEFAULT_EMBEDDING_N_CTX, 8,192). */
  uint32_t n_ctx;
  uint32_t n_batch; /* prefill batch */
  /* Deprecated: kv_mode "f32" / "fp16" say the same. The dense cache's precision when
   * kv_mode is NULL or "" (default TERN_KV_F16: half of f32's bytes, exact to fp16 rounding,
   * what kv_mode "auto" picks when nothing limits it). */
  tern_kv_type kv_type TERN_DEPRECATED_FIELD("use kv_mode \"f32\" or \"fp16\"");
  /* KV mode (copied at load): "f32", "fp16" (dense, exact); "q8", "q4", "q3", "q2", "k4v2"
   * (compressed per-head cache, quantized blocks of 32 tokens, exact sinks and recent
   * window); "adaptive:B" (the bundle's calibrated per-head widths at B average bits;
   * TERN_NOT_FOUND lists the averages the bundle holds). A compressed mode followed by
   * ">A@N" ages its blocks: more than N tokens past the exact window their codes are
   * truncated to at most A bits ("q4>2@96", "adaptive:3>2@128"; runtime/kv/README.md).
   * Any mode followed by "/hh" evicts per head instead of StreamingLLM's oldest block: each
   * KV head holds its own number of blocks (from the bundle's calibrated attention entropy;
   * "/hh=equal": the same for all) and drops the one its queries attend to least, the newest
   * 90 % of its blocks excepted ("@R%" sets that share: "q4/hh@50%"). Speculative decoding
   * and exact roll-back are off with it (attention already paid cannot be taken back).
   * NULL or "" (the default): kv_type, dense (fp16 by default). */
  const char* kv_mode;
  int32_t kv_sink_tokens;   /* -1: the mode's default (4, adaptive: the bundle's) */
  int32_t kv_recent_window; /* exact recent tokens; -1: the default (32, adaptive: the bundle's) */
  /* StreamingLLM eviction: -1 default (on for compressed modes, off for f32/fp16), 0 off,
   * 1 on (f32/fp16 then use the compressed cache with every head exact). With eviction a
   * session generates past n_ctx without TERN_CONTEXT_FULL: the sink tokens and the most
   * recent ones stay, the oldest middle blocks are dropped. Start from
   * tern_model_default_params(): a zeroed struct means 0 sinks and eviction off. */
  int32_t kv_eviction;
  /* Sessions the model can hold at once (0 counts as 1). Each gets its own slot of the arena
   * with n_ctx positions (or what the budget allows), so they run concurrently from different
   * threads while sharing the mapped weights; the budget covers them all. */
  uint32_t n_sessions;
  /* Speculative decoding: room in every session to verify up to n_draft drafted tokens per
   * step (at most 15; n_draft + 1 token ids and n_draft x vocab floats, the draft model's
   * distributions for speculative sampling). 0: none. Sessions turn it on with
   * tern_session_params.n_draft or tern_session_set_draft(). */
  uint32_t n_draft;
  /* Grammar-constrained generation: each session slot's memory for a compiled grammar and its
   * parse stacks (tern_session_set_grammar), inside the budget; with it the model also keeps
   * the vocabulary's bytes sorted for grammars to walk (shared by the sessions). A JSON grammar
   * over LLaMA-3's 128,256 tokens needs about 3.7 MiB, a tool call's about 4.9 MiB (over 2,048
   * tokens: 1.3 and 1.4 MiB); too little is TERN_GRAMMAR_TOO_LARGE naming what it needs.
   * TERN_GRAMMAR_BYTES_AUTO (the default): 2 MiB + 48 bytes per token of the vocabulary, in
   * whole 64 KiB (7.9 MiB for 128,256 tokens, 2.1 MiB for 2,048); none for an embedding model.
   * 0: sessions take no grammar (TERN_INVALID_STATE). */
  uint64_t grammar_bytes;
  /* The weights' pages. Decode reads every weight once a token: in 4 KiB pages that is a TLB
   * miss every 4 KiB, in 2 MiB pages almost none (tern_model_weights_pages() tells which).
   * The bundle is mapped advised for large pages (Linux MADV_HUGEPAGE), so a file read from
   * disk gets them where the kernel gives a file large folios. NULL, "" or "auto" (the
   * default): the mapping read in at load, and the parts the page cache held in small pages
   * (as the program that wrote or downloaded the file leaves them) dropped and read again,
   * once a probe of one large page shows that this gives large ones; no memory beyond the
   * mapping, elsewhere nothing is done. "map": the mapping alone, read on first use, in the
   * pages the page cache has. "copy": the bundle copied into anonymous memory in large pages,
   * in place of the mapping (Linux with transparent huge pages, else TERN_NOT_SUPPORTED):
   * large pages whatever the page cache and filesystem, for the same bytes, but those are not
   * reclaimable like the file's pages, not shared with another process mapping the bundle,
   * and counted as the app's own memory (tern_memory_report.weights_bytes). Anything else:
   * TERN_INVALID_ARGUMENT. Read at load. */
  const char* weights_pages;
} tern_model_params;

typedef struct tern_sampler_params {
  float temperature;     /* 0: greedy */
  int32_t top_k;         /* 0: off */
  float top_p;           /* in (0, 1]; 1: off */
  float min_p;           /* in [0, 1]; 0: off */
  float repeat_penalty;  /* > 0; 1: off */
  int32_t repeat_last_n; /* >= 0 */
  uint64_t seed;
  /* OpenAI-style penalties over the last repeat_last_n tokens: a token seen c times loses
   * c * frequency_penalty + (c > 0) * presence_penalty from its logit. 0: off. */
  float presence_penalty;
  float frequency_penalty;
} tern_sampler_params;

typedef struct tern_session_params {
  tern_sampler_params sampler;
  /* Speculative decoding in tern_generate(): draft up to n_draft tokens per step and verify
   * them in one batched pass. Drafts come from prompt lookup (the text after the latest
   * earlier occurrence of the last 3, 2 or 1 tokens) or, with draft_model, from a second,
   * smaller model with the identical tokenizer. Greedy: the text is exactly the
   * one-token-at-a-time greedy text. Sampling: speculative sampling (a draft x is kept with
   * probability min(1, p(x)/q(x)), p and q the sampler's distributions of this model and
   * the draft after the same temperature, top-k, min-p and top-p, and a rejection draws from
   * max(0, p - q) renormalized), so every token is distributed as plain sampling's. It
   * applies while the sampler has no penalties and no logit hook is set (otherwise tokens
   * are decoded one at a time). 0: off; at most tern_model_params.n_draft. */
  uint32_t n_draft;
  /* NULL: prompt lookup. Otherwise a loaded model that drafts: the session takes one of its
   * session slots (TERN_INVALID_STATE when none is free) and runs the same tokens there.
   * TERN_INVALID_ARGUMENT when its tokenizer is not identical (vocabulary, pieces, special
   * tokens) or it is this session's own model. Free the session before the draft model. */
  tern_model* draft_model;
  /* A GBNF grammar (NUL-terminated) the session's sampling follows from the start, as
   * tern_session_set_grammar() sets it; NULL: none. */
  const char* grammar;
} tern_session_params;

typedef struct tern_model_info {
  uint32_t vocab_size;
  uint32_t context_tokens; /* the planned context */
  uint32_t max_context;    /* what the model was trained for */
  uint32_t layers, hidden, heads, kv_heads, head_dim;
  int32_t bos_id, eos_id, eot_id;
  const char* chat_template; /* the bundle's template text, or NULL */
  uint32_t n_threads;        /* threads the model runs on (after clamping to the cores) */
  /* How tern_chat_apply() renders a conversation: "llama3" (header tokens), "bitnet-2b4t"
   * ("User: ...<|eot_id|>Assistant: "), or "plain" ("User: ...\nAssistant:", the fallback
   * for bundles whose template the converter did not recognize). */
  const char* chat_format;
  /* A stop string for formats without an end-of-turn token ("\nUser:" for "plain"), or NULL. */
  const char* chat_stop;
  uint32_t n_sessions; /* session slots (tern_model_params.n_sessions) */
} tern_model_info;

/* Where the memory goes (bytes). arena_used_bytes and the per-purpose fields are live. */
typedef struct tern_memory_report {
  uint64_t budget_bytes;
  uint64_t planned_total_bytes; /* overhead + weights + arena */
  uint64_t minimum_budget_bytes;
  uint64_t process_overhead_bytes;
  uint64_t weights_bytes; /* mapped bundle bytes (weights_pages "copy": its anonymous copy) */
  uint64_t arena_bytes;
  uint64_t arena_used_bytes;
  uint64_t arena_weights_bytes; /* weights converted into the arena */
  uint64_t arena_tokenizer_bytes;
  uint64_t arena_scratch_bytes;
  uint64_t arena_kv_cache_bytes;
  uint64_t arena_sampler_bytes;
  uint64_t arena_other_bytes;
  uint32_t context_tokens; /* positions the KV cache holds at once */
  uint32_t batch_tokens;
  double kv_bytes_per_token; /* marginal KV bytes per position, all layers and heads */
  int kv_compressed;         /* 1: per-head compressed cache (kv_mode q*, k*v*, adaptive) */
  int kv_evicting;           /* 1: positions may exceed context_tokens (eviction on) */
  char kv_mode[32];          /* the resolved mode: "f32", "q4", "adaptive:2.5", ... */
  uint32_t sessions;         /* session slots; arena_bytes holds all of them */
  uint32_t sessions_in_use;
  uint64_t session_bytes; /* one slot: session object, scratch, sampler and KV cache */
} tern_memory_report;

typedef enum tern_stop_reason {
  TERN_STOP_MAX_TOKENS = 0,
  TERN_STOP_END_OF_GENERATION = 1,
  TERN_STOP_STOP_STRING = 2,
  TERN_STOP_CALLBACK = 3,
  TERN_STOP_CONTEXT_FULL = 4
} tern_stop_reason;

typedef struct tern_generate_params {
  uint32_t max_new_tokens;
  int add_bos;                     /* prepend BOS when the session is empty */
  int parse_special;               /* special-token text in the prompt becomes control tokens */
  const char* const* stop_strings; /* at most 8, each at most 64 bytes */
  size_t n_stop_strings;
} tern_generate_params;

typedef struct tern_generate_stats {
  uint32_t prompt_tokens;
  uint32_t generated_tokens;
  uint32_t decoded_tokens;
  double prefill_seconds;
  double decode_seconds;
  tern_stop_reason stop_reason;
  uint32_t drafted_tokens;  /* speculative decoding: tokens drafted (prompt lookup or draft model) */
  uint32_t accepted_tokens; /* of those, the ones verification kept */
  uint32_t verify_steps;    /* batched verification passes */
} tern_generate_stats;

/* Receives generated text, whole UTF-8 characters, not NUL-terminated. Return nonzero to stop. */
typedef int (*tern_piece_callback)(const char* text, size_t size, void* user_data);

typedef enum tern_log_level {
  TERN_LOG_DEBUG = 0,
  TERN_LOG_INFO = 1,
  TERN_LOG_WARNING = 2,
  TERN_LOG_ERROR = 3,
  TERN_LOG_OFF = 4
} tern_log_level;
typedef void (*tern_log_callback)(tern_log_level level, const char* message, void* user_data);

TERN_API tern_model_params tern_model_default_params(void);
TERN_API tern_session_params tern_session_default_params(void);
TERN_API tern_sampler_params tern_sampler_default_params(void);
TERN_API tern_generate_params tern_generate_default_params(void);

/* "OK", "BUDGET_TOO_SMALL", ...; "UNKNOWN" for other values. Static storage. */
TERN_API const char* tern_status_string(tern_status status);
/* The message of the last failure on this thread ("" if none). Valid until the next call. */
TERN_API const char* tern_last_error_message(void);
TERN_API const char* tern_version(void);
/* Parses a byte size as the CLIs take it: "512M", "1.5G", "4096K", "123456" (K/M/G are powers
 * of 1024, optionally followed by "i" and "B"). TERN_INVALID_ARGUMENT for anything else. */
TERN_API tern_status tern_parse_byte_size(const char* text, uint64_t* out_bytes);

/* NULL callback restores stderr. */
TERN_API void tern_set_log_callback(tern_log_callback callback, void* user_data);
TERN_API void tern_set_log_level(tern_log_level level);

TERN_API tern_status tern_model_load(const char* path, const tern_model_params* params, tern_model** out_model);
TERN_API void tern_model_free(tern_model* model);
TERN_API tern_status tern_model_get_info(const tern_model* model, tern_model_info* out_info);
TERN_API tern_status tern_memory_report_get(const tern_model* model, tern_memory_report* out_report);
/* The weights' pages (tern_model_params.weights_pages): what loading did and what the kernel
 * maps them with now. On Linux the counts are the kernel's (/proc/self/smaps: FilePmdMapped
 * for the bundle's mapping, AnonHugePages for the copy); elsewhere `known` is 0. */
typedef struct tern_weights_pages {
  char mode[8]; /* "auto", "map" or "copy" */
  /* What loading did: "not tried" (map), "as read" (large pages as read), "re-read" (the page
   * cache held small pages: dropped and read again), "collapsed" (the kernel rebuilt them in
   * place), "copied", "unavailable" (the kernel gives this file no large pages), "smaller than
   * a large page", "unsupported" (no large pages here), "unknown" (/proc unreadable). */
  char load[32];
  int mapped;                /* 0: the bundle was read into memory (no mmap) */
  int anonymous;             /* 1: the copy ("copy"), not the file's pages */
  int known;                 /* 1: resident_bytes and large_bytes are the kernel's */
  uint64_t bytes;            /* the bundle file (or its copy) */
  uint64_t resident_bytes;   /* of those, in memory now */
  uint64_t large_bytes;      /* of those, mapped with large pages now */
  uint64_t large_page_bytes; /* the kernel's large page (2 MiB on x86-64); 0: none */
} tern_weights_pages;
TERN_API tern_status tern_model_weights_pages(const tern_model* model, tern_weights_pages* out_pages);
/* Whether the memory budget `model` was loaded with is above the machine's physical memory
 * (*out_above = 1). Such a budget loads (the plan itself may be small) but bounds nothing the
 * machine can give; the load also logs a warning. *out_physical_bytes (NULL: not wanted) is
 * that memory, 0 where the platform cannot tell (then *out_above is 0). No budget: 0. */
TERN_API tern_status tern_model_budget_above_physical(const tern_model* model, int* out_above,
                                                      uint64_t* out_physical_bytes);

/* Text to token ids. *out_count receives the number of ids; with too small a capacity the
 * call fails with TERN_OUT_OF_RANGE and *out_count holds the number needed. */
TERN_API tern_status tern_tokenize(tern_model* model, const char* text, size_t text_size, int add_bos,
                                   int parse_special, int32_t* out_tokens, size_t capacity, size_t* out_count);
/* Token ids to text (control tokens skipped), NUL-terminated; *out_size excludes the NUL. */
TERN_API tern_status tern_detokenize(const tern_model* model, const int32_t* tokens, size_t count, char* out_text,
                                     size_t capacity, size_t* out_size);

TERN_API tern_status tern_session_create(tern_model* model, const tern_session_params* params,
                                         tern_session** out_session);
TERN_API void tern_session_free(tern_session* session);
/* Forgets the conversation and clears an abort request. */
TERN_API tern_status tern_session_reset(tern_session* session);
TERN_API tern_status tern_session_set_sampler(tern_session* session, const tern_sampler_params* params);
/* Drafted tokens per speculative step (tern_session_params.n_draft); 0 turns drafting off.
 * TERN_INVALID_ARGUMENT above the model's tern_model_params.n_draft. */
TERN_API tern_status tern_session_set_draft(tern_session* session, uint32_t n_draft);
/* The draft source (tern_session_params.draft_model): a model with the same tokenizer, or
 * NULL for prompt lookup. Releases the slot of the previous draft model. */
TERN_API tern_status tern_session_set_draft_model(tern_session* session, tern_model* draft_model);
/* Tokens run so far (with eviction this may exceed the KV capacity, context_tokens). */
TERN_API tern_status tern_session_position(const tern_session* session, uint32_t* out_position);

/* Runs tokens after the current position (batched). With eviction, any number of tokens:
 * batches past the capacity evict as they go. */
TERN_API tern_status tern_prefill(tern_session* session, const int32_t* tokens, size_t count);
/* Runs one token. TERN_CONTEXT_FULL when no position is free (never with eviction on). */
TERN_API tern_status tern_decode(tern_session* session, int32_t token);

/* Sessions of one model decoded together. Every weight matrix is read once per pass for all the
 * tokens in it, so N streams cost far less than N times one; each session's logits are exactly
 * those it would get alone. Sessions driven from different threads at the same time (tern_decode,
 * tern_prefill, tern_generate, tern_chat_complete) are merged this way on their own; this call
 * steps a set of sessions from one thread: entries[i].session runs its n_tokens tokens after its
 * position, as tern_prefill() would (1 for a decode step; a prompt's tokens join in pieces beside
 * decoding ones). Then each has its logits: tern_sample() each and call again. entries[i].status
 * gets each result (one failing does not stop the others); the return is TERN_OK when all ran,
 * else the first failure. TERN_INVALID_ARGUMENT, nothing run, for sessions of different models, a
 * session listed twice or a NULL session. No allocation. */
typedef struct tern_batch_entry {
  tern_session* session;
  const int32_t* tokens;
  size_t n_tokens;
  tern_status status; /* out */
} tern_batch_entry;
TERN_API tern_status tern_decode_batch(tern_batch_entry* entries, size_t count);
/* Logits of the last token run (vocab_size floats), valid until the next prefill/decode/reset. */
TERN_API tern_status tern_get_logits(const tern_session* session, const float** out_logits, size_t* out_vocab_size);
TERN_API tern_status tern_sample(tern_session* session, int32_t* out_token);
/* tern_sample() with log-probabilities (OpenAI's logprobs / top_logprobs), from the logits the
 * token was drawn from: after the logit bias, the hook and the grammar's mask, with the
 * penalties and the temperature (temperature 0: as 1), before top-k, min-p and top-p. The
 * sampled token's goes to *out_chosen (NULL: none are computed, as tern_sample()); the top_n
 * most likely tokens (at most 20, else TERN_INVALID_ARGUMENT; out_top NULL when top_n is 0) to
 * out_top, most likely first, ties by the lower id, *out_n_top (may be NULL) of them: fewer
 * when fewer are possible, as banned and masked tokens (-INFINITY) never appear. The draw and
 * its RNG use are tern_sample()'s. text/size: the bytes generation emits for the token after
 * other text ("" for a control token), so the sampled tokens' texts make the generated text;
 * a SentencePiece vocabulary needs grammar memory (tern_model_params.grammar_bytes) for that,
 * without it they are the stored piece (U+2581 for a space, "<0x0A>" for a byte). struct
 * tern_token_logprob is defined with the chat completions below. */
struct tern_token_logprob;
TERN_API tern_status tern_sample_logprobs(tern_session* session, uint32_t top_n, int32_t* out_token,
                                          struct tern_token_logprob* out_chosen, struct tern_token_logprob* out_top,
                                          size_t* out_n_top);
/* Tokenize + prefill + sample/decode loop, streaming text through `callback` (may be NULL). */
TERN_API tern_status tern_generate(tern_session* session, const char* prompt, size_t prompt_size,
                                   const tern_generate_params* params, tern_piece_callback callback, void* user_data,
                                   tern_generate_stats* out_stats);

/* ---- Planner: what a bundle needs, per KV mode, before loading it ----
 * tern_plan() maps and verifies the bundle (no arena, no threads, nothing kept) and fills one
 * row per KV mode with the plan tern_model_load(bundle_path, params) would make with that
 * kv_mode (the same code computes both): params->memory_budget_bytes > 0 gives the largest
 * context within it (n_ctx caps it, as at load); 0 gives the budget n_ctx needs (0: the
 * default context, as at load). Load with memory_budget_bytes = row.total_bytes and that mode
 * and the session's context is row.context_tokens; row.minimum_budget_bytes loads, one byte less
 * fails with TERN_BUDGET_TOO_SMALL. params->kv_mode is ignored (each row has its own).
 * Allocates only while it runs; call it before loading, not while generating. */
typedef struct tern_plan_row {
  char kv_mode[32];
  tern_status status;        /* TERN_OK, or why the mode has no plan (e.g. BUDGET_TOO_SMALL:
                                the budget holds not even its smallest cache) */
  uint32_t context_tokens;   /* KV positions held at once */
  double kv_bytes_per_token; /* marginal, all layers and heads */
  uint64_t weights_bytes;    /* mapped bundle (weights_pages "copy": its anonymous copy) */
  uint64_t process_overhead_bytes;
  uint64_t arena_bytes;          /* converted weights + tokenizer + scratch + sampler + KV */
  uint64_t scratch_bytes;        /* activations, attention scores, token history */
  uint64_t kv_bytes;             /* the KV cache (exact byte function of its kind) */
  uint64_t total_bytes;          /* process overhead + weights + arena: the budget this plan needs */
  uint64_t minimum_budget_bytes; /* the smallest budget that loads this mode at all */
  uint64_t session_bytes;        /* one session slot of context_tokens */
  /* With a budget: how many sessions of context_tokens fit in it (the answer to "how many
   * conversations of N tokens can this device hold": plan with n_ctx = N); else n_sessions. */
  uint32_t sessions_that_fit;
} tern_plan_row;

/* kv_modes: the modes to plan (NULL: "fp16", "q8", "q4", "q2", then "adaptive:B" for every
 * average the bundle is calibrated at). Writes min(capacity, modes) rows and *out_count =
 * the number of modes (rows == NULL with capacity 0 asks for the count). TERN_OUT_OF_RANGE
 * when capacity is too small (the first `capacity` rows are still written). A mode that
 * cannot be planned sets its row's status (tern_last_error_message() holds the last such
 * message); the call itself fails only for bad arguments or an unreadable bundle. */
TERN_API tern_status tern_plan(const char* bundle_path, const tern_model_params* params, const char* const* kv_modes,
                               size_t n_kv_modes, tern_plan_row* rows, size_t capacity, size_t* out_count);

/* ---- Bundle checksum ----
 * tern-convert records a checksum of the whole bundle file (XXH64 of the header and of the
 * data area; schema/README.md). tern_model_load() never reads it: loading maps the weights
 * without reading them, and stays as fast. tern_bundle_verify() opens the bundle with the
 * checks tern_model_load() makes, reads every byte (about as fast as the disk or page cache
 * gives them) and compares: TERN_OK when the checksum matches (*out_recorded = 1) or when the
 * bundle records none (*out_recorded = 0: converted before checksums were written; with
 * require_checksum != 0 that is TERN_NOT_FOUND); TERN_CORRUPT_FILE when it differs, the
 * message naming the damaged part (the header: config, tensor table, tokenizer; or the data
 * area: the weights) and both values; the load errors for a bundle that does not open.
 * out_recorded may be NULL. To check a bundle at load, call it before tern_model_load() (the
 * CLIs' --verify-bundle). */
TERN_API tern_status tern_bundle_verify(const char* bundle_path, int require_checksum, int* out_recorded);

/* ---- Chat ----
 * Renders a conversation into the text the model was trained on, with the bundle's chat
 * format (tern_model_info.chat_format; the converter derives it from the checkpoint's
 * tokenizer_config.json chat_template). Roles: "system", "user", "assistant", and "tool" for
 * a tool's result (LLaMA 3.1's "ipython" turn in the llama3 format, "Tool: " in the others;
 * anything else is TERN_INVALID_ARGUMENT, naming it); content must be valid UTF-8 (TERN_INVALID_UTF8).
 * add_assistant_prefix != 0 ends with the assistant's header, so generation writes the reply.
 * The text starts with the BOS token's text when the format opens conversations with it:
 * tokenize or generate it with add_bos = 0 and parse_special = 1. Writes a NUL-terminated
 * string; *out_size is its length without the NUL, also when `capacity` is too small (then
 * TERN_OUT_OF_RANGE: call again with *out_size + 1 bytes). No heap use. */
typedef struct tern_chat_message {
  const char* role;
  const char* content;
} tern_chat_message;
TERN_API tern_status tern_chat_apply(const tern_model* model, const tern_chat_message* messages, size_t n_messages,
                                     int add_assistant_prefix, char* buf, size_t capacity, size_t* out_size);

/* ---- Session state: suspend and resume a conversation ----
 * The state is the KV cache exactly as stored (dense or compressed), the position, the token
 * history and the sampler (parameters and random state), tagged with the bundle and the KV
 * layout it belongs to: a restored session continues with exactly the tokens an unsaved one
 * would. Load into a session of the same model and KV mode (the same bundle, kv_mode, n_ctx,
 * sinks and window); anything else is TERN_INVALID_ARGUMENT saying what differs, and a
 * damaged or truncated state TERN_CORRUPT_FILE / TERN_TRUNCATED; a failed load leaves the
 * session reset. tern_session_state_save() with too small a buffer is TERN_OUT_OF_RANGE with
 * *out_size set to the size needed (tern_session_state_size() says it up front; it grows
 * with the position). The _file variants write atomically (a temporary beside the file,
 * fsynced, renamed over it, the directory fsynced): a crash or kill mid-save leaves the
 * previous file whole; a failed save returns TERN_IO_ERROR and leaves it untouched. */
TERN_API tern_status tern_session_state_size(const tern_session* session, size_t* out_size);
TERN_API tern_status tern_session_state_save(const tern_session* session, void* buf, size_t capacity, size_t* out_size);
TERN_API tern_status tern_session_state_load(tern_session* session, const void* buf, size_t size);
TERN_API tern_status tern_session_state_save_file(const tern_session* session, const char* path);
TERN_API tern_status tern_session_state_load_file(tern_session* session, const char* path);

/* The tokens the session holds, oldest first: every token run so far, or with eviction the
 * most recent ones (at least the KV capacity). *out_count is how many there are; with too
 * small a capacity the call fails with TERN_OUT_OF_RANGE after writing the newest `capacity`.
 * Servers compare a new prompt with it to reuse the common prefix (tern_session_truncate). */
TERN_API tern_status tern_session_history(const tern_session* session, int32_t* out_tokens, size_t capacity,
                                          size_t* out_count);

/* ---- Rewind ----
 * Keeps the first n_tokens positions and forgets the rest (regenerate an answer, edit the
 * last turn); afterwards the logits are those after position n_tokens - 1, as if only the
 * kept tokens had ever run. Exact and cheap for dense caches and while the dropped positions
 * are still in a compressed cache's exact window; otherwise the session is reset and the kept
 * tokens are prefilled again from its token history (TERN_INVALID_STATE when the history no
 * longer holds them, i.e. after eviction). n_tokens > position is TERN_INVALID_ARGUMENT. */
TERN_API tern_status tern_session_truncate(tern_session* session, uint32_t n_tokens);

/* ---- Logits before sampling ----
 * A bias list (copied; at most 1024 entries; token ids in range; -INFINITY bans a token) and
 * a hook, both applied in that order to a copy of the logits before tern_sample() and
 * tern_generate() pick a token: ban or favour tokens, or plug in a grammar. The hook runs on
 * the sampling thread and must not call back into the session. NULL / 0 removes them. */
typedef struct tern_logit_bias {
  int32_t token;
  float bias;
} tern_logit_bias;
typedef void (*tern_logit_hook)(float* logits, size_t n_vocab, const int32_t* history, size_t n_history,
                                void* user_data);
TERN_API tern_status tern_session_set_logit_bias(tern_session* session, const tern_logit_bias* entries,
                                                 size_t n_entries);
TERN_API tern_status tern_session_set_logit_hook(tern_session* session, tern_logit_hook hook, void* user_data);

/* ---- Structured output: grammars and JSON Schemas ----
 * tern_session_set_grammar() constrains sampling to a GBNF grammar (llama.cpp's format: rules
 * `name ::= ...` with "literals", [character classes], [^negated], ., ( groups ), |, *, +, ?,
 * {m}, {m,}, {m,n}, # comments; the text starts at the rule "root"). It is compiled into the
 * session's grammar memory (tern_model_params.grammar_bytes; TERN_INVALID_STATE without it,
 * TERN_GRAMMAR_TOO_LARGE when it does not fit, TERN_INVALID_GRAMMAR with the line and column,
 * TERN_INVALID_UTF8). Then tern_sample() and tern_generate() only pick tokens whose bytes keep
 * the text a prefix of a sentence of the grammar (tokens may span several of its symbols and
 * split UTF-8 characters), and the end-of-generation tokens only where the sentence is
 * complete. The mask applies after the logit bias and hook, before the penalties,
 * temperature, top-k, min-p and top-p; speculative decoding keeps only drafts the grammar
 * allows and gives the same text as without it. tern_generate() starts the grammar anew on
 * every call (one sentence per reply) and stops when it is complete; tern_sample() advances
 * it; tern_session_reset(), _truncate() and _state_load() restart it. NULL removes it;
 * setting the text already set only restarts it (no recompilation), and a text another
 * session of the model has compiled is copied from it (no vocabulary walk). A failed call
 * leaves the session without a grammar. Nothing is allocated per token. The compile takes
 * one walk over the vocabulary per position of the grammar (large repetitions such as
 * maxLength are counted, not copied out); tern_session_request_abort() from another thread
 * stops it with TERN_ABORTED.
 *
 * tern_json_schema_to_grammar() writes the grammar for JSON text that validates against a
 * JSON Schema: types, properties / required / additionalProperties, enum, const, arrays
 * (items, minItems, maxItems), anyOf, oneOf of branches taking disjoint kinds of value, allOf
 * of one schema, $ref to any JSON pointer of the document (recursion allowed), minLength /
 * maxLength, integer and number ranges (integer bounds), formats date, time, date-time and
 * uuid. Annotations (title, description, default, examples, ...) are ignored; any other
 * keyword is refused with TERN_UNSUPPORTED_SCHEMA naming it and its place in the schema.
 * The grammar is NUL-terminated in buf; *out_size is its length, also when `capacity` is too
 * small (TERN_OUT_OF_RANGE: call again with *out_size + 1 bytes). The schema
 * {"type": "object"} gives any JSON object. Allocates while it runs (about 0.5 MB), not
 * while generating. */
TERN_API tern_status tern_session_set_grammar(tern_session* session, const char* grammar, size_t size);
TERN_API tern_status tern_json_schema_to_grammar(const char* schema, size_t size, char* buf, size_t capacity,
                                                 size_t* out_size);

/* ---- Chat completions: one request, the reply streamed as events ----
 * tern_chat_complete() runs a whole OpenAI-shaped request on a session: a chat (messages,
 * tools, tool_choice, response_format) or a completion (a prompt), with its own sampling
 * settings, stop strings, max_tokens and logprobs. The server, the Python and Java bindings
 * use it; how each chat format shows tools and how a call is recognised are defined here.
 *
 * The call is stateless: it starts from the prompt it is given. The session is a cache: the
 * tokens it already holds that begin the new prompt are kept (prefix reuse, reported as
 * cached_tokens) and only the rest is prefilled; afterwards it holds the prompt and the reply.
 * The request's sampler, logit bias and grammar are set on the session for this call (and
 * stay set); the sampler is reseeded from sampler.seed, so equal requests give equal replies.
 *
 * Tools: a system message (the request's first one, extended, or a new first one) lists each
 * function as a JSON line {"name", "description", "parameters"} after an instruction to answer
 * a call with only {"name": ..., "arguments": ...}. The grammar then allows exactly that
 * object with "name" one of the functions and "arguments" valid against its parameters
 * (TERN_TOOL_CHOICE_REQUIRED; _FUNCTION: only that one), or that or text not starting with
 * "{" (_AUTO; with a JSON response_format, that or the JSON reply). Earlier calls (assistant
 * turns with tool_calls) are rendered as the same object, one per line; a tool's result (role
 * "tool") is the format's tool turn. One call per reply. "developer" is rendered as "system".
 *
 * Memory: the prompt is rendered into the session slot's chat memory (the context times the
 * vocabulary's longest piece, enough for any prompt that fits the context) and schemas are
 * converted and compiled in its grammar memory (tern_model_params.grammar_bytes); the same
 * request structure again reuses the compiled grammar. Nothing is allocated. */
typedef struct tern_tool_call {
  const char* id;        /* the call's id (not shown to the model); may be NULL */
  const char* name;      /* the function */
  const char* arguments; /* JSON text of its arguments */
} tern_tool_call;

typedef struct tern_chat_turn {
  const char* role;                 /* "system", "developer", "user", "assistant" or "tool" */
  const char* content;              /* UTF-8; NULL: none (an assistant turn with only tool calls) */
  const tern_tool_call* tool_calls; /* an assistant's earlier calls, or NULL */
  size_t n_tool_calls;
  const char* tool_call_id; /* "tool": the call this result answers (not shown), or NULL */
} tern_chat_turn;

typedef struct tern_chat_tool {
  const char* name;        /* 1 to 64 of a-z, A-Z, 0-9, _ and - */
  const char* description; /* or NULL */
  const char* parameters;  /* JSON Schema text of the arguments; NULL: any object */
} tern_chat_tool;

typedef enum tern_tool_choice {
  TERN_TOOL_CHOICE_AUTO = 0,     /* a call or a reply, as the model decides */
  TERN_TOOL_CHOICE_NONE = 1,     /* the tools are not shown */
  TERN_TOOL_CHOICE_REQUIRED = 2, /* a call */
  TERN_TOOL_CHOICE_FUNCTION = 3  /* a call of tool_name */
} tern_tool_choice;

typedef enum tern_response_format {
  TERN_RESPONSE_TEXT = 0,
  TERN_RESPONSE_JSON_OBJECT = 1, /* any JSON object */
  TERN_RESPONSE_JSON_SCHEMA = 2, /* JSON valid against response_schema */
  TERN_RESPONSE_GRAMMAR = 3      /* text of the GBNF grammar in `grammar` */
} tern_response_format;

typedef enum tern_finish_reason {
  TERN_FINISH_STOP = 0,      /* an end token, a stop string, or the grammar's end */
  TERN_FINISH_LENGTH = 1,    /* max_tokens or the context */
  TERN_FINISH_TOOL_CALLS = 2 /* a complete tool call */
} tern_finish_reason;

typedef struct tern_chat_request {
  /* A chat (messages non-NULL) or a completion (prompt: raw text, after a BOS when the model
   * adds one; special-token text becomes control tokens; or prompt_tokens below). */
  const tern_chat_turn* messages;
  size_t n_messages;
  const char* prompt;
  size_t prompt_size;
  const tern_chat_tool* tools; /* chat only */
  size_t n_tools;
  tern_tool_choice tool_choice; /* with tools; ignored without */
  const char* tool_name;        /* TERN_TOOL_CHOICE_FUNCTION */
  tern_response_format response_format;
  const char* response_schema; /* TERN_RESPONSE_JSON_SCHEMA: JSON Schema text */
  const char* grammar;         /* TERN_RESPONSE_GRAMMAR: GBNF text (not with tools) */
  tern_sampler_params sampler; /* for this call; the seed makes it repeatable */
  const tern_logit_bias* logit_bias;
  size_t n_logit_bias;
  uint32_t max_tokens;             /* 0: up to the context */
  const char* const* stop_strings; /* each at most 64 bytes; at most 8 with the chat format's
                                      own stop string, which a chat adds */
  size_t n_stop_strings;
  int logprobs;          /* nonzero: a TERN_CHAT_TOKEN event per generated token */
  uint32_t top_logprobs; /* with logprobs: the N most likely alternatives (at most 20) */
  /* A completion's prompt as token ids instead of text: run as given (no BOS added), each
   * id checked against the vocabulary (TERN_INVALID_TOKEN). Not with `prompt`. */
  const int32_t* prompt_tokens;
  size_t n_prompt_tokens;
} tern_chat_request;

typedef enum tern_chat_event_type {
  TERN_CHAT_CONTENT = 0,        /* text of the reply (whole UTF-8 characters) */
  TERN_CHAT_TOOL_CALL = 1,      /* a tool call begins: text is the function's name */
  TERN_CHAT_TOOL_ARGUMENTS = 2, /* the next piece of the call's arguments (JSON text) */
  TERN_CHAT_TOKEN = 3           /* logprobs: a generated token, before its text arrives */
} tern_chat_event_type;

/* A token's log-probability under the distribution sampling drew from: the logits after the
 * logit bias, the hook, the grammar's mask, the penalties and the temperature (greedy: as
 * temperature 1), before top-k, min-p and top-p (OpenAI's definition). text/size are the
 * token's bytes (owned by the model; may be part of a UTF-8 character). */
typedef struct tern_token_logprob {
  int32_t token;
  float logprob;
  const char* text;
  size_t size;
} tern_token_logprob;

typedef struct tern_chat_event {
  tern_chat_event_type type;
  const char* text; /* CONTENT, TOOL_CALL, TOOL_ARGUMENTS */
  size_t size;
  uint32_t tool_call_index;        /* TOOL_CALL, TOOL_ARGUMENTS */
  const tern_token_logprob* token; /* TOKEN: the chosen token */
  const tern_token_logprob* top;   /* TOKEN: top_logprobs alternatives, most likely first */
  size_t n_top;
} tern_chat_event;
/* Valid during the call. Return nonzero to stop (finish reason TERN_FINISH_STOP). */
typedef int (*tern_chat_callback)(const tern_chat_event* event, void* user_data);

typedef struct tern_chat_result {
  tern_finish_reason finish_reason;
  tern_stop_reason stop_reason;
  uint32_t n_tool_calls;      /* 1 when the reply is a tool call (complete or cut by length) */
  uint32_t prompt_tokens;     /* the whole prompt */
  uint32_t cached_tokens;     /* of those, the ones the session held already */
  uint32_t completion_tokens; /* generated, the end token included */
  double prefill_seconds;
  double decode_seconds;
} tern_chat_result;

TERN_API tern_chat_request tern_chat_default_request(void);
/* Runs `request` on `session`; events go to `callback` (may be NULL). TERN_INVALID_ARGUMENT
 * names the field a request gets wrong; TERN_UNSUPPORTED_SCHEMA / TERN_INVALID_GRAMMAR the
 * schema or grammar; TERN_PROMPT_TOO_LONG when the prompt and one token do not fit. */
TERN_API tern_status tern_chat_complete(tern_session* session, const tern_chat_request* request,
                                        tern_chat_callback callback, void* user_data, tern_chat_result* out_result);
/* The text tern_chat_complete() would tokenize (tools shown, the assistant's header at the
 * end) and the grammar it would follow ("" for none), as tern_chat_apply() writes: *out_size
 * is the length, TERN_OUT_OF_RANGE when capacity is too small. Both allocate while they run
 * (for tools, debugging and tests; not needed to generate). */
TERN_API tern_status tern_chat_prompt(const tern_model* model, const tern_chat_request* request, char* buf,
                                      size_t capacity, size_t* out_size);
TERN_API tern_status tern_chat_grammar(const tern_model* model, const tern_chat_request* request, char* buf,
                                       size_t capacity, size_t* out_size);

/* ---- Memory that is really there ----
 * Bytes this process could still get without being killed for memory: on Linux and Android
 * MemAvailable from /proc/meminfo, lowered to the cgroup's memory limit minus its usage when
 * one is set; on iOS os_proc_available_memory(). TERN_NOT_SUPPORTED elsewhere. */
TERN_API tern_status tern_available_memory(uint64_t* out_bytes);
/* A memory budget as the CLIs take it: a byte size ("1.5G", tern_parse_byte_size), or
 * "available" / "available-25%" (tern_available_memory(), less that share as a margin). */
TERN_API tern_status tern_parse_memory_budget(const char* text, uint64_t* out_bytes);

/* Asks a running prefill/decode/generate on `session` to stop with TERN_ABORTED (checked per
 * layer), or its grammar's compile (tern_session_set_grammar). Any thread may call it; the
 * request stays until tern_session_clear_abort() or tern_session_reset(). */
TERN_API tern_status tern_session_request_abort(tern_session* session);
TERN_API tern_status tern_session_clear_abort(tern_session* session);

/* ---- Embeddings (embedding bundles: BitNet-embedding-0.6B / -270M and their kind) ----
 * An embedding model turns each text into one vector: its tokens (after the instruction, if
 * any, and with the model's end token) run through the model, the hidden states are pooled
 * (last token, mean or first, as the bundle says) and L2-normalized. tern_embed() takes a
 * batch of texts and runs several of them per forward pass (each attends only to itself);
 * it writes into the caller's buffer and allocates nothing. A session of an embedding model
 * only embeds (tern_prefill/tern_generate return TERN_NOT_SUPPORTED), and tern_embed on a
 * generative model returns TERN_NOT_SUPPORTED. One session per thread, as for generation. */
typedef enum tern_embed_format {
  TERN_EMBED_FLOAT32 = 0, /* dimensions floats */
  TERN_EMBED_INT8 = 1,    /* dimensions int8: round(v * 127 / max|v|); scale max|v| / 127 per text */
  TERN_EMBED_BINARY = 2   /* ceil(dimensions / 8) bytes: bit 7 - i % 8 of byte i / 8 is v_i > 0 */
} tern_embed_format;

typedef struct tern_embed_params {
  uint32_t dimensions; /* 0: the model's; else the first D dimensions, re-normalized (Matryoshka) */
  tern_embed_format format;
  /* A prompt stored in the bundle ("query", "document", ...) put in front of every text.
   * NULL: the bundle's default prompt (none when it has none); "": no prompt. */
  const char* prompt_name;
  /* Text put in front of every text instead of a stored prompt (e.g. the model card's
   * "Instruct: <task>\nQuery: "); NULL: none. */
  const char* instruction;
  /* Nonzero: texts longer than the context keep their first tokens (and the end token);
   * zero: they fail with TERN_PROMPT_TOO_LONG. */
  int truncate;
} tern_embed_params;

typedef struct tern_embed_stats {
  uint32_t n_texts;
  uint64_t n_tokens;    /* tokens run (prompts and end tokens included) */
  uint32_t n_batches;   /* forward passes */
  uint32_t n_truncated; /* texts cut to the context */
  double seconds;
} tern_embed_stats;

typedef enum tern_pooling { TERN_POOLING_LAST = 0, TERN_POOLING_MEAN = 1, TERN_POOLING_FIRST = 2 } tern_pooling;

typedef struct tern_embedding_info {
  uint32_t dimensions; /* 0: not an embedding model */
  tern_pooling pooling;
  int normalized;             /* vectors are L2-normalized */
  size_t n_prompts;           /* named prompts stored in the bundle (tern_model_embedding_prompt) */
  const char* default_prompt; /* the prompt used when tern_embed_params.prompt_name is NULL, or NULL */
} tern_embedding_info;

TERN_API tern_embed_params tern_embed_default_params(void);
/* Bytes one text's vector takes (a row of tern_embed's output). */
TERN_API size_t tern_embed_row_bytes(tern_embed_format format, uint32_t dimensions);
TERN_API tern_status tern_model_get_embedding_info(const tern_model* model, tern_embedding_info* out_info);
/* Stored prompt `index` (< n_prompts): its name and text (owned by the model). */
TERN_API tern_status tern_model_embedding_prompt(const tern_model* model, size_t index, const char** out_name,
                                                 const char** out_text);
/* One vector per text into `out`, n_texts rows of tern_embed_row_bytes(format, D) bytes
 * (TERN_OUT_OF_RANGE, nothing written, when out_bytes is smaller). text_sizes may be NULL
 * (NUL-terminated texts). out_scales (n_texts floats, may be NULL) gets the int8 scales. */
TERN_API tern_status tern_embed(tern_session* session, const char* const* texts, const size_t* text_sizes,
                                size_t n_texts, const tern_embed_params* params, void* out, size_t out_bytes,
                                float* out_scales, tern_embed_stats* out_stats);
/* As tern_embed(), for inputs given as token ids: input i is the n_tokens[i] ids tokens[i]
 * (as tern_tokenize() gives a text's with add_bos = 0), embedded without being turned into
 * text. The call adds what tern_embed() adds around a text's tokens: the BOS when the
 * tokenizer adds one (not again when the ids start with it), the prompt (params.prompt_name or
 * .instruction, tokenized alone) after it, and the model's end token (not again when the ids
 * end with it). The vector equals tern_embed()'s of a text whose tokens these are when there
 * is no prompt, or when the prompt's tokens followed by the text's are those of the prompt and
 * text joined (tokens across the seam may merge). An id outside the vocabulary is
 * TERN_INVALID_TOKEN; an input with no ids TERN_INVALID_ARGUMENT. */
TERN_API tern_status tern_embed_tokens(tern_session* session, const int32_t* const* tokens, const size_t* n_tokens,
                                       size_t n_inputs, const tern_embed_params* params, void* out, size_t out_bytes,
                                       float* out_scales, tern_embed_stats* out_stats);

/* ---- kv_mode "auto" ----
 * tern_model_params.kv_mode = "auto" lets the planner choose the KV mode at load: of "fp16",
 * "q8", "q4", "q3", "q2" and every "adaptive:B" the bundle holds, the one with the least
 * KL(exact || mode) estimated from the bundle's calibration (the sum of its heads' recorded
 * single-head sensitivities at their widths; ties: fewer bytes per token) that holds n_ctx
 * tokens (0: the model's context) in memory_budget_bytes, i.e. gets the context it would get
 * with no budget. An uncalibrated bundle gets the most bits per element that holds it.
 * tern_memory_report_get() names the chosen mode in kv_mode; tern_plan() with the mode
 * "auto" writes the chosen mode into the row's kv_mode. TERN_BUDGET_TOO_SMALL when no mode
 * holds the context; tern_last_error_message() then lists the context each would get. */

#ifdef __cplusplus
}
#endif

#endif /* TERN_H_ */
