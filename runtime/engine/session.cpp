// The core of a session: its slot carved at init, prefill, decode, sampling with the logit
// bias, hook and grammar, and going back (reset, truncate).
#include "runtime/engine/session.h"

#include <cmath>
#include <cstring>

#include "runtime/engine/model.h"
#include "runtime/text/tokenizer.h"

namespace tern {

namespace {

// Ids past the tokenizer (padded embedding rows) can never be turned into text: do not sample them.
uint32_t sampled_vocab(const Model& model) {
  uint32_t vocab = model.config().vocab;
  if (const Tokenizer* t = model.tokenizer();
      t != nullptr && t->vocab_size() > 0 && static_cast<uint32_t>(t->vocab_size()) < vocab) {
    vocab = static_cast<uint32_t>(t->vocab_size());
  }
  return vocab;
}

}  // namespace

Error Session::init(Model& model, const SamplerParams& sampler, ArenaAllocator& arena) {
  model_ = &model;
  const MemoryPlan& plan = model.plan();
  context_ = plan.context_tokens;
  SessionShape shape;
  shape.config = &model.config();
  shape.kv = &model.kv_spec();
  shape.context = context_;
  shape.batch = plan.batch_tokens;
  shape.draft_tokens = plan.draft_tokens;
  shape.grammar_bytes = plan.grammar_bytes;
  shape.sample_vocab = sampled_vocab(model);
  SessionMemory memory;
  TERN_RETURN_IF_ERROR(layout_session(shape, &arena, &sampler_, &memory, nullptr));
  kv_ = memory.kv;
  scratch_ = memory.scratch;
  buffers_ = memory.buffers;
  evicting_ = kv_->evicting();
  scratch_.reposition_sinks = model.kv_sink_reposition_;
  // An embedding model's sampler has no arrays (it never decodes) but keeps its parameters.
  TERN_RETURN_IF_ERROR(validate(sampler));
  return sampler_.configure(sampler);
}

Session::~Session() {
  if (draft_ != nullptr) draft_->model().destroy_session(draft_);
}

void Session::append_history(const int32_t* tokens, uint32_t n) {
  if (history_len_ + n > buffers_.history_capacity) {
    // Slide: keep the newest tokens (at least context_ of them, since n <= batch <= context_).
    const uint32_t keep = buffers_.history_capacity - n < history_len_ ? buffers_.history_capacity - n : history_len_;
    std::memmove(buffers_.history, buffers_.history + (history_len_ - keep), keep * sizeof(int32_t));
    history_len_ = keep;
  }
  std::memcpy(buffers_.history + history_len_, tokens, n * sizeof(int32_t));
  history_len_ += n;
}

Error Session::check_consistent() const {
  TERN_CHECK_OR_RETURN(!needs_reset_, Error::InvalidState,
                       "an earlier failed batch left the KV cache inconsistent; reset the session");
  return Error::Ok;
}

Error Session::drop_failed_batch(uint32_t first, Error e) {
  has_logits_ = false;
  if (kv_->rollback_to(first) != Error::Ok) needs_reset_ = true;
  return e;
}

Error Session::check_prefill(const int32_t* tokens, size_t count) const {
  TERN_CHECK_OR_RETURN(!model_->config().embedding, Error::NotSupported,
                       "an embedding model has no next-token logits: embed texts instead");
  TERN_CHECK_OR_RETURN(tokens != nullptr || count == 0, Error::InvalidArgument, "prefill with null tokens");
  TERN_RETURN_IF_ERROR(check_consistent());
  if (!evicting_ && count > context_ - position_) {
    return fail(Error::PromptTooLong, "%zu tokens do not fit: %u of the %u-token context are free (KV eviction is off)",
                count, context_ - position_, context_);
  }
  if (evicting_ && count > UINT32_MAX - position_) {
    return fail(Error::PromptTooLong, "%zu tokens after position %u pass the last position 2^32-1", count, position_);
  }
  const uint32_t vocab = model_->config().vocab;
  for (size_t i = 0; i < count; ++i) {
    TERN_CHECK_OR_RETURN(tokens[i] >= 0 && static_cast<uint32_t>(tokens[i]) < vocab, Error::InvalidToken,
                         "token %d at index %zu is outside the vocabulary of %u", tokens[i], i, vocab);
  }
  return Error::Ok;
}

Error Session::prefill(const int32_t* tokens, size_t count) {
  TERN_RETURN_IF_ERROR(check_prefill(tokens, count));
  if (count == 0) return Error::Ok;
  // Through the model's queue: passes other sessions ask for meanwhile run with this one.
  ForwardSequence q = sequence(tokens, static_cast<uint32_t>(count));
  q.want_logits = true;
  model_->forward_queue().run(&q, 1);
  return finish_prefill(q);
}

ForwardSequence Session::sequence(const int32_t* tokens, uint32_t n) {
  ForwardSequence q;
  q.kv = kv_;
  q.own = &scratch_;
  q.tokens = tokens;
  q.n = n;
  q.pos0 = position_;
  q.abort = &abort_;
  return q;
}

Error Session::finish_prefill(const ForwardSequence& q) {
  // The rows that ran before a failure stay; the piece that failed is dropped.
  for (uint32_t done = 0; done < q.rows_done;) {
    const uint32_t n = q.rows_done - done < scratch_.batch ? q.rows_done - done : scratch_.batch;
    append_history(q.tokens + done, n);
    done += n;
  }
  position_ += q.rows_done;
  if (q.status != Error::Ok) return drop_failed_batch(position_, fail(q.status, "%s", q.message));
  has_logits_ = true;
  return Error::Ok;
}

Error Session::decode(int32_t token) {
  if (!evicting_ && position_ >= context_) {
    return fail(Error::ContextFull, "the %u-token context is full (KV eviction is off); reset the session", context_);
  }
  return prefill(&token, 1);
}

Result<int32_t> Session::sample(TokenLogprobs* logprobs) {
  if (!has_logits_) return fail(Error::InvalidState, "sample before any prefill or decode");
  TERN_ASSIGN_OR_RETURN(const int32_t token, sample_from(scratch_.logits, nullptr, logprobs));
  if (grammar_.compiled()) TERN_RETURN_IF_ERROR(grammar_.accept_token(token));
  return token;
}

PieceView Session::token_text(int32_t token) const {
  const Tokenizer* tokenizer = model_->tokenizer();
  if (tokenizer == nullptr || token < 0 || token >= tokenizer->vocab_size() || tokenizer->is_control(token)) {
    return {"", 0};
  }
  const GrammarVocab& vocab = model_->grammar_vocab();
  if (!vocab.built() || static_cast<uint32_t>(token) >= vocab.size()) return tokenizer->piece(token);
  return {reinterpret_cast<const char*>(vocab.bytes(static_cast<uint32_t>(token))),
          vocab.length(static_cast<uint32_t>(token))};
}

Result<const float*> Session::steered_logits(const float* logits, const Grammar::State* state) {
  const bool constrained = grammar_.compiled();
  if (bias_count_ == 0 && hook_ == nullptr && !constrained) return logits;
  const uint32_t vocab = model_->config().vocab;
  std::memcpy(buffers_.biased_logits, logits, vocab * sizeof(float));
  for (size_t i = 0; i < bias_count_; ++i) buffers_.biased_logits[buffers_.bias[i].token] += buffers_.bias[i].bias;
  if (hook_ != nullptr) hook_(buffers_.biased_logits, vocab, buffers_.history, history_len_, hook_user_);
  if (constrained) {
    TERN_ASSIGN_OR_RETURN(const uint32_t left,
                          grammar_.mask_logits(state != nullptr ? *state : grammar_.state(), buffers_.biased_logits));
    TERN_CHECK_OR_RETURN(left > 0, Error::InvalidState,
                         "the grammar allows no token here that the logit bias and hook left possible");
  }
  return static_cast<const float*>(buffers_.biased_logits);
}

Result<int32_t> Session::sample_from(const float* logits, const Grammar::State* state, TokenLogprobs* logprobs) {
  TERN_ASSIGN_OR_RETURN(const float* steered, steered_logits(logits, state));
  const int32_t token = sampler_.sample(steered, buffers_.history, history_len_);
  if (logprobs != nullptr) {
    logprobs->logprob = sampler_.log_probabilities(steered, buffers_.history, history_len_, token, logprobs->top,
                                                   logprobs->top_n, &logprobs->n_top);
  }
  return token;
}

Result<uint32_t> Session::grammar_cut(const int32_t* drafts, uint32_t k) {
  if (!grammar_.compiled()) return k;
  grammar_.begin_drafts();
  for (uint32_t i = 0; i < k; ++i) {
    TERN_ASSIGN_OR_RETURN(const bool allowed, grammar_.step_draft(i, drafts[i]));
    if (!allowed) return i;
  }
  return k;
}

Error Session::set_grammar(const char* text, size_t size) {
  if (text == nullptr) {
    model_->grammar_compiled(*this, false);
    grammar_.clear();
    return Error::Ok;
  }
  TERN_CHECK_OR_RETURN(buffers_.grammar != nullptr, Error::InvalidState,
                       "the model was loaded without grammar memory: set tern_model_params.grammar_bytes (e.g. "
                       "8 MiB for a 128k-token vocabulary)");
  // The same text (compared whole: a hash can be made to collide) only restarts.
  if (grammar_.compiled_from(text, size)) {
    grammar_.restart();
    return Error::Ok;
  }
  // Another session's compile of the same text is copied; else it is compiled here.
  TERN_ASSIGN_OR_RETURN(const bool copied, model_->copy_shared_grammar(*this, text, size));
  if (copied) return Error::Ok;
  const Error e =
      grammar_.compile(text, size, model_->grammar_vocab(), buffers_.grammar, buffers_.grammar_bytes, &abort_);
  model_->grammar_compiled(*this, e == Error::Ok);
  return e;
}

Error Session::set_logit_bias(const LogitBias* entries, size_t count) {
  TERN_CHECK_OR_RETURN(buffers_.bias != nullptr, Error::NotSupported, "an embedding model has no logits to bias");
  TERN_CHECK_OR_RETURN(entries != nullptr || count == 0, Error::InvalidArgument, "logit bias: null entries");
  TERN_CHECK_OR_RETURN(count <= kMaxLogitBias, Error::InvalidArgument, "%zu logit bias entries (at most %zu)", count,
                       kMaxLogitBias);
  const uint32_t vocab = model_->config().vocab;
  for (size_t i = 0; i < count; ++i) {
    TERN_CHECK_OR_RETURN(entries[i].token >= 0 && static_cast<uint32_t>(entries[i].token) < vocab, Error::InvalidToken,
                         "logit bias entry %zu: token %d outside the vocabulary of %u", i, entries[i].token, vocab);
    TERN_CHECK_OR_RETURN(!std::isnan(entries[i].bias) && entries[i].bias != INFINITY, Error::InvalidArgument,
                         "logit bias entry %zu: bias %g (finite, or -inf to ban)", i, entries[i].bias);
  }
  if (count > 0) std::memcpy(buffers_.bias, entries, count * sizeof(LogitBias));
  bias_count_ = count;
  return Error::Ok;
}

void Session::reset() {
  pending_count_ = pending_next_ = 0;
  forced_next_ = -1;
  if (draft_ != nullptr) draft_->reset();
  position_ = 0;
  history_len_ = 0;
  needs_reset_ = false;
  kv_->reset();
  has_logits_ = false;
  clear_abort();
  (void)sampler_.configure(sampler_.params());  // reseed: the same seed gives the same text again
  grammar_.restart();
}

Error Session::refill_logits() {
  // Roll back past the last kept position and run it again: the cache then holds exactly
  // positions [0, position_) and the logits are those after the last one.
  const uint32_t last = position_ - 1;
  TERN_RETURN_IF_ERROR(kv_->rollback_to(last));
  const int32_t token = buffers_.history[history_len_ - 1];
  const Error e = forward(*model_, *kv_, scratch_, &token, 1, last, true, &abort_);
  if (e != Error::Ok) return drop_failed_batch(last, e);
  has_logits_ = true;
  return Error::Ok;
}

Error Session::truncate(uint32_t n) {
  TERN_CHECK_OR_RETURN(n <= position_, Error::InvalidArgument, "truncate to %u tokens: the session holds %u", n,
                       position_);
  TERN_RETURN_IF_ERROR(check_consistent());
  if (n == position_) return Error::Ok;
  if (draft_ != nullptr) draft_->drop_after(n);
  grammar_.restart();
  // The history holds the last history_len_ tokens: positions [position_ - history_len_, position_).
  const uint32_t first_kept_in_history = position_ - history_len_;
  if (n == 0) {
    const SamplerParams params = sampler_.params();
    uint64_t rng[4];
    sampler_.rng().get_state(rng);
    reset();
    (void)sampler_.configure(params);
    sampler_.rng().set_state(rng);  // truncation is not a new conversation: the draws go on
    return Error::Ok;
  }
  if (kv_->rollback_is_exact(n - 1) && n - 1 >= first_kept_in_history) {
    history_len_ -= position_ - n;
    position_ = n;
    return refill_logits();
  }
  // Otherwise run the kept tokens again on a fresh cache, which needs all of them.
  TERN_CHECK_OR_RETURN(first_kept_in_history == 0 && n <= context_, Error::InvalidState,
                       "truncate to %u tokens: positions before %u were evicted, so they cannot be run again; "
                       "reset the session",
                       n, first_kept_in_history);
  std::memcpy(buffers_.prompt, buffers_.history, n * sizeof(int32_t));
  position_ = 0;
  history_len_ = 0;
  has_logits_ = false;
  kv_->reset();
  return prefill(buffers_.prompt, n);
}

}  // namespace tern
