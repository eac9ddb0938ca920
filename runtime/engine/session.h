// One conversation with a model: the KV cache, forward scratch, sampler and token
// history, all inside the model's arena. Prefill and decode never allocate.
// Not thread-safe: one thread drives a session at a time.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "platform/error.h"
#include "runtime/engine/embed.h"
#include "runtime/engine/forward.h"
#include "runtime/engine/sampler.h"
#include "runtime/engine/session_layout.h"
#include "runtime/engine/stop_strings.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/structured/grammar.h"
#include "runtime/text/tokenizer.h"

namespace tern {

class Model;

// Why generate() stopped. Ids appear in the C API: append only.
enum class StopReason : int32_t {
  MaxTokens = 0,    // produced max_new_tokens
  EndOfGeneration,  // sampled EOS / end-of-turn
  StopString,       // the text reached one of the stop strings (not emitted)
  Callback,         // the piece callback asked to stop
  ContextFull,      // no room for another token
};

struct GenerateOptions {
  uint32_t max_new_tokens = 128;
  bool add_bos = true;        // only applies when the session is empty
  bool parse_special = true;  // "<|eot_id|>" in the prompt becomes the control token
  const char* const* stop_strings = nullptr;
  size_t stop_string_count = 0;
  // Per emitted token (not the end token), before its text goes to the piece callback (the
  // text may come later, or never when it completes a stop string): the token and, with
  // logprobs_top set, its log-probability and the logprobs_top most likely alternatives
  // (Session::sample(TokenLogprobs*)); else logprob is NaN and there are none. Asking for
  // logprobs turns speculative decoding off for the call: accepted drafts are not sampled.
  static constexpr uint32_t kNoLogprobs = UINT32_MAX;
  using TokenCallback = void (*)(int32_t token, float logprob, const TokenLogprob* top, uint32_t n_top, void* user);
  uint32_t logprobs_top = kNoLogprobs;  // else 0 to kMaxTopLogprobs (more: InvalidArgument)
  TokenCallback on_token = nullptr;
  void* token_user = nullptr;
  bool wants_logprobs() const { return on_token != nullptr && logprobs_top != kNoLogprobs; }
};

// A sampled token's log-probability and the most likely alternatives, from the logits it was
// drawn from (Sampler::log_probabilities on the steered copy).
struct TokenLogprobs {
  uint32_t top_n = 0;  // in: alternatives wanted (at most kMaxTopLogprobs)
  float logprob = 0.0f;
  uint32_t n_top = 0;
  TokenLogprob top[kMaxTopLogprobs];
};

struct GenerateStats {
  uint32_t prompt_tokens = 0;
  uint32_t generated_tokens = 0;  // sampled tokens, the end token included
  uint32_t decoded_tokens = 0;    // tokens run through decode() (or accepted by a verification)
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;  // sampling included
  StopReason stop_reason = StopReason::MaxTokens;
  uint32_t drafted_tokens = 0;   // speculative decoding: tokens proposed by prompt lookup
  uint32_t accepted_tokens = 0;  // of those, the ones verification kept
  uint32_t verify_steps = 0;     // batched verification passes
};

class Session {
 public:
  // Runs the tokens after the current position, in batches. Without eviction:
  // PromptTooLong (nothing run) when they do not fit in the context; the prompt is never
  // truncated silently. With eviction (evicting()): any length; batches past the cache's
  // capacity evict the oldest middle blocks as they go (a batch's earlier tokens see the
  // cache as it is after the whole batch was written, so up to batch-1 fewer old positions
  // than token-by-token decoding would keep).
  Error prefill(const int32_t* tokens, size_t count);
  // Several sessions of one model at once: sessions[i] runs tokens[i][0..counts[i]) as
  // prefill() would, and all of them go through the layers together, so every weight is read
  // once per pass for all (the outputs are exactly those of running each alone). statuses[i]
  // gets each session's result (a failed one does not stop the others); the return is Ok when
  // all ran, else the first failure. InvalidArgument (nothing run, in every status) for
  // sessions of different models, a session listed twice, or a null pointer.
  static Error prefill_together(Session* const* sessions, const int32_t* const* tokens, const size_t* counts,
                                size_t count, Error* statuses);
  // One token (the decode GEMV path). ContextFull when the context is used up (never with
  // eviction: positions then grow past the capacity, up to 2^32 - 1).
  Error decode(int32_t token);
  // Logits after the last prefill/decode (vocab floats); null before any.
  const float* logits() const { return has_logits_ ? scratch_.logits : nullptr; }
  // Draws the next token from logits() with the sampler (history feeds the penalties), after
  // the logit bias and hook (if set) on a copy of the logits.
  Result<int32_t> sample() { return sample(nullptr); }
  // The same draw; `logprobs` (may be null) also gets the token's log-probability and the
  // top_n most likely alternatives under the distribution it was drawn from: the logits after
  // the bias, the hook and the grammar's mask (at the state before the token), the penalties
  // and the temperature (greedy: temperature 1), before top-k, min-p and top-p. No allocation.
  Result<int32_t> sample(TokenLogprobs* logprobs);
  // A token's text beside its log-probability (owned by the model): the bytes generation emits
  // for it after other text, so the emitted tokens' texts make the text; empty for a control
  // token or an id outside the vocabulary. A SentencePiece vocabulary needs the grammar
  // vocabulary for that (ModelParams::grammar_bytes); without it, its stored piece (U+2581
  // for a space, "<0x0A>" for a byte).
  PieceView token_text(int32_t token) const;
  // Logit bias entries (copied, at most kMaxLogitBias) and a hook, applied before sampling.
  static constexpr size_t kMaxLogitBias = tern::kMaxLogitBias;
  using LogitBias = tern::LogitBias;
  using LogitHook = void (*)(float* logits, size_t n_vocab, const int32_t* history, size_t n_history, void* user);
  Error set_logit_bias(const LogitBias* entries, size_t count);
  void set_logit_hook(LogitHook hook, void* user) {
    hook_ = hook;
    hook_user_ = hook != nullptr ? user : nullptr;
  }
  Error set_sampler(const SamplerParams& params) { return sampler_.configure(params); }
  const SamplerParams& sampler_params() const { return sampler_.params(); }

  // Grammar-constrained sampling: `text` is a GBNF grammar (root rule "root"), compiled into
  // the session's grammar memory (ModelParams::grammar_bytes; InvalidState without it,
  // GrammarTooLarge when it does not fit, InvalidGrammar naming the line and column). From
  // then on sample() only picks tokens whose text keeps the output a prefix of a sentence of
  // the grammar, and end tokens only where it is a whole one; the mask applies after the
  // logit bias and hook, before penalties and the sampler's transforms. sample() advances the
  // grammar; generate() starts it from the root on every call; reset() and truncate() restart
  // it. Null (or size 0) removes it. Setting the text already compiled only restarts it.
  Error set_grammar(const char* text, size_t size);
  bool has_grammar() const { return grammar_.compiled(); }
  const Grammar& grammar() const { return grammar_; }

  // Tokenizes `prompt`, prefills it and generates until a stop condition, streaming text to
  // `on_piece` (may be null). Needs a bundle's tokenizer. PromptTooLong when the prompt's
  // tokens do not fit in the free context (with eviction: in context_tokens(), the size of
  // the tokenizer's buffer; longer prompts go through prefill()). With eviction it never
  // stops for ContextFull.
  Error generate(const char* prompt, size_t prompt_size, const GenerateOptions& options, PieceCallback on_piece,
                 void* user_data, GenerateStats* stats);

  // Speculative decoding in generate(): before each decode step up to `k` tokens are drafted,
  // by prompt lookup (the text after the latest earlier occurrence of the last 3, 2 or 1
  // tokens) or by a draft model (set_draft_model), one batched forward pass verifies them and
  // the cache rolls back past the rejected ones. Greedy: the longest prefix greedy decoding
  // would have produced is kept, so the text is exactly the non-speculative greedy text.
  // Sampling (temperature > 0): speculative sampling (speculative_accept on the sampler's
  // distributions of target and draft), so every token is distributed as plain sampling's.
  // Used when there are no penalties and no logit hook (a logit bias is fine); otherwise
  // generate() decodes one token at a time. k = 0 turns it off; at most the model's
  // ModelParams::draft_tokens.
  Error set_draft_tokens(uint32_t k);
  uint32_t draft_tokens() const { return draft_max_; }
  // One verification pass with drafts from any source: runs `token` and drafts[0..k) (k <=
  // draft_tokens(), all within exact_append_room() and the context) as one batch, keeps
  // `token` and the drafts greedy decoding picks in turn, rolls the rest back and leaves the
  // logits after the last kept one. Returns how many drafts were kept.
  Result<uint32_t> verify_drafts(int32_t token, const int32_t* drafts, uint32_t k);
  // Drafts with a second, smaller model instead of prompt lookup: a session of `draft` (one
  // of its slots, so no allocation) runs the same tokens and proposes k tokens per step
  // (greedy, or drawn from its distribution when sampling), rolled back past the ones the
  // target rejects. The tokenizers must be identical (InvalidArgument naming the first
  // difference); InvalidState when `draft` has no free session slot. Null: prompt lookup
  // again. `draft` must outlive this session. The draft's positions are limited by its own
  // context (drafting pauses when it is full) and its KV mode (rollback must be exact).
  Error set_draft_model(Model* draft);
  const Session* draft_session() const { return draft_; }

  // Embedding models only (NotSupported otherwise): one vector per text into `out`, `count`
  // rows of embed_row_bytes(options.format, D) bytes (OutOfRange, nothing written, when
  // out_bytes is smaller). texts[i] has sizes[i] bytes (sizes null: NUL-terminated). The
  // texts go through the prefill path several to a batch, each attending only to itself;
  // the session holds no conversation (it is reset before and after). `scales` (count
  // floats, may be null) receives the int8 scales. No allocation.
  Error embed(const char* const* texts, const size_t* sizes, size_t count, const EmbedOptions& options, void* out,
              size_t out_bytes, float* scales, EmbedStats* stats);
  // The same for texts or token-id lists (EmbedInputs); ids outside the vocabulary are
  // InvalidToken.
  Error embed(const EmbedInputs& inputs, const EmbedOptions& options, void* out, size_t out_bytes, float* scales,
              EmbedStats* stats);

  // ---- A whole prompt at a time, with prefix reuse (runtime/chat) ----
  // Tokenizes `text` into the session's prompt buffer (prompt_tokens()); PromptTooLong, naming
  // both, when it needs more than the context (with room for one generated token unless the
  // session evicts).
  Result<size_t> encode_prompt(const char* text, size_t size, bool add_bos, bool parse_special);
  const int32_t* prompt_tokens() const { return buffers_.prompt; }
  // Makes the session hold exactly `tokens` (`count` of them, at least 1) with fresh logits:
  // the positions it holds that begin them stay, and only the rest is run (at least the
  // last token). Where the cache cannot roll back exactly to the common prefix, it starts
  // over. Returns how many tokens were kept (not run).
  Result<uint32_t> prefill_reusing(const int32_t* tokens, size_t count);
  // The chat engine's memory in the slot (SessionBuffers::chat_text / chat_work).
  char* chat_text() { return buffers_.chat_text; }
  size_t chat_text_bytes() const { return buffers_.chat_text_bytes; }
  void* chat_work() { return buffers_.chat_work; }
  size_t chat_work_bytes() const { return buffers_.chat_work_bytes; }

  // Forgets the conversation (the memory stays) and clears an abort request.
  void reset();
  // Keeps positions [0, n) and forgets the rest; the logits become those after position
  // n - 1. Exact when the cache can roll back to exactly the state of a fresh run of n
  // tokens (dense caches, compressed ones inside the exact window); otherwise the cache is
  // reset and the kept tokens are prefilled again from the history (InvalidState when it no
  // longer holds them).
  Error truncate(uint32_t n);

  // The conversation as bytes (see tern_session_state_save): its size now, a copy, and the
  // copy back into a session of the same model and KV spec.
  size_t state_size() const;
  Result<size_t> save_state(void* buf, size_t capacity) const;
  Error load_state(const void* buf, size_t size);
  // Positions run so far (with eviction this may exceed context_tokens()).
  uint32_t position() const { return position_; }
  // Positions the KV cache holds at once (its capacity).
  uint32_t context_tokens() const { return context_; }
  bool evicting() const { return evicting_; }
  // The most recent tokens, oldest first, history_size() of them: every token without
  // eviction; with eviction a sliding window of at least the last context_tokens() (it
  // feeds the repetition penalty, which looks back repeat_last_n <= that many).
  const int32_t* history() const { return buffers_.history; }
  uint32_t history_size() const { return history_len_; }
  // Host tools: see attention per layer (null to remove). Attention then runs serially.
  void set_attention_observer(const AttentionObserver* observer) { scratch_.observer = observer; }
  // Tests and tools: the forward scratch (e.g. reposition_sinks off, to measure what it fixes).
  ForwardScratch& forward_scratch() { return scratch_; }

  // Makes a running prefill/decode/generate return Aborted soon (checked per layer). Safe
  // to call from any thread; stays in effect until clear_abort() or reset().
  void request_abort() { abort_.store(1, std::memory_order_relaxed); }
  void clear_abort() { abort_.store(0, std::memory_order_relaxed); }

  Model& model() const { return *model_; }
  const KvCache& kv_cache() const { return *kv_; }

 private:
  friend class Model;
  Session() = default;
  ~Session();
  // Carves the session's slot (session_layout.h) after the Session object.
  Error init(Model& model, const SamplerParams& sampler, ArenaAllocator& arena);

  Model* model_ = nullptr;
  KvCache* kv_ = nullptr;
  ForwardScratch scratch_;
  Sampler sampler_;
  void append_history(const int32_t* tokens, uint32_t n);
  // InvalidState when an earlier failed batch left the cache where rollback cannot reach.
  Error check_consistent() const;
  // A batch that started at position `first` failed with `e` (returned): the positions before
  // it stay valid, the batch is dropped (a compressed cache forgets the positions it wrote, or
  // the session must be reset) and there are no logits.
  Error drop_failed_batch(uint32_t first, Error e);
  // The session's tokens[0..n) after its position, as a forward pass takes them (no logits asked).
  ForwardSequence sequence(const int32_t* tokens, uint32_t n);
  // prefill()'s checks (the arguments, the room left), nothing changed.
  Error check_prefill(const int32_t* tokens, size_t count) const;
  // After a prefill's sequence ran (ForwardQueue::run): its rows in the history and position,
  // and its status (a failed piece dropped).
  Error finish_prefill(const ForwardSequence& q);

  Error refill_logits();  // logits after position_ - 1, from a rolled-back or re-run cache
  // `logits` with the logit bias, the hook and the grammar's mask at `state` (null: its
  // current state) applied (in buffers_.biased_logits), or `logits` itself. InvalidState when the
  // grammar allows nothing that still has a finite logit.
  Result<const float*> steered_logits(const float* logits, const Grammar::State* state = nullptr);
  // The drafts after the current text that the grammar allows, cut at the first it does not
  // (drafts_[k] in the grammar's draft slots). All of them without a grammar.
  Result<uint32_t> grammar_cut(const int32_t* drafts, uint32_t k);
  Result<int32_t> sample_from(const float* logits, const Grammar::State* state = nullptr,
                              TokenLogprobs* logprobs = nullptr);
  bool drafting() const;
  // Drafts after the text so far followed by `token`, at most `max`, into out.
  uint32_t lookup_drafts(int32_t token, uint32_t max, int32_t* out) const;
  // Decodes `token` and verifies up to `max_drafts` drafted tokens after it in one pass;
  // the accepted ones (already in the cache) go to pending_.
  Error decode_drafting(int32_t token, uint32_t max_drafts, GenerateStats& stats);
  // The draft model's proposals after the text so far followed by `token` (at most `max`,
  // into verify_tokens + 1; with `sampling` each one's distribution into draft_probs).
  // Drafting is optional: a draft that cannot run (full, out of sync, failing) proposes 0.
  uint32_t draft_model_drafts(int32_t token, uint32_t max, bool sampling);
  // Runs in the draft session what it lacks of our text (and `token` when not null); false
  // when it cannot (its context is full, our history no longer reaches back, it failed).
  bool draft_catch_up(const int32_t* token);
  // verify_drafts with speculative sampling: q_rows holds the drafts' distributions (null:
  // prompt lookup's deterministic drafts). A rejected draft's replacement goes to forced_next_.
  Result<uint32_t> verify_batch(int32_t token, const int32_t* drafts, uint32_t k, bool sampling, const float* q_rows);
  // Keeps positions [0, n) (a draft session following its target); resets when rollback
  // cannot be exact.
  void drop_after(uint32_t n);

  // generate()'s steps: the prompt tokenized and prefilled (its token count), the next token
  // to emit (an accepted draft, a rejected draft's replacement or a sample; -1 when a
  // grammar is complete and has no end token to say so), and whether a token ends the text.
  Result<size_t> prefill_prompt(const char* prompt, size_t prompt_size, const GenerateOptions& options);
  Result<int32_t> next_generated_token(bool* predecoded, uint32_t* decoded_ahead, TokenLogprobs* logprobs);
  bool ends_generation(int32_t token) const;

  // Embedding models: assembles and runs batches of several texts (embed.cpp).
  struct EmbedBatch;
  // Input i's ids, framed as a text's are (BOS, prompt, end token), into buffers_.prompt.
  Result<uint32_t> embed_input_tokens(const EmbedInputs& inputs, size_t i, const char* prompt, size_t prompt_size,
                                      int32_t end_token, bool truncate, EmbedStats& stats);
  Error embed_run_batch(EmbedBatch& batch, bool last_text_complete, const EmbedOptions& options, uint32_t dims,
                        void* out, float* scales);
  SessionBuffers buffers_;  // the history, prompt, steering, drafting and embedding buffers
  size_t bias_count_ = 0;
  LogitHook hook_ = nullptr;
  void* hook_user_ = nullptr;
  uint32_t draft_max_ = 0;      // in use (set_draft_tokens)
  uint32_t pending_count_ = 0;  // accepted drafts not yet emitted by generate()
  uint32_t pending_next_ = 0;   // the next of them: buffers_.verify_tokens[1 + pending_next_]
  int32_t forced_next_ = -1;    // speculative sampling: the token a rejection drew, emitted after pending_
  Grammar grammar_;
  bool grammar_shared_ = false;  // other sessions may copy grammar_ (guarded by the model's slots lock)
  Session* draft_ = nullptr;     // the draft model's session (in that model's arena)
  uint32_t history_len_ = 0;
  uint32_t context_ = 0;
  uint32_t position_ = 0;
  bool evicting_ = false;
  bool needs_reset_ = false;  // a failed batch left the cache where rollback cannot reach
  bool has_logits_ = false;
  std::atomic<int> abort_{0};
};

}  // namespace tern
