#include "runtime/engine/session.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "platform/clock.h"
#include "runtime/base/hash.h"
#include "runtime/engine/model.h"
#include "runtime/kv/kv_cache_spec.h"
#include "runtime/text/tokenizer.h"

namespace tern {

Error Session::init(Model& model, const SamplerParams& sampler, ArenaAllocator& arena) {
  model_ = &model;
  const MemoryPlan& plan = model.plan();
  context_ = plan.context_tokens;
  const KvCacheSpec& spec = model.kv_spec();
  TERN_ASSIGN_OR_RETURN(kv_, create_kv_cache(spec, context_, arena));
  TERN_CHECK_OR_RETURN(kv_->capacity_tokens() == context_, Error::Internal,
                       "KV cache capacity %u differs from the planned %u", kv_->capacity_tokens(), context_);
  evicting_ = kv_->evicting();
  size_t unused = 0;
  TERN_RETURN_IF_ERROR(carve_forward_scratch(model.config(), plan.batch_tokens,
                                             kv_->attention_scores_per_head(model.config().heads / model.config().kv_heads),
                                             &arena, &scratch_, &unused));
  scratch_.reposition_sinks = model.kv_sink_reposition_;
  history_capacity_ = session_history_tokens(context_, evicting_);
  TERN_ASSIGN_OR_RETURN(history_, arena.allocate_array<int32_t>(history_capacity_, ArenaPurpose::Scratch, 64));
  TERN_ASSIGN_OR_RETURN(prompt_, arena.allocate_array<int32_t>(context_, ArenaPurpose::Scratch, 64));
  if (model.config().embedding) return init_embedding(model, sampler, arena);
  TERN_ASSIGN_OR_RETURN(biased_logits_,
                        arena.allocate_array<float>(model.config().vocab, ArenaPurpose::Scratch, 64));
  TERN_ASSIGN_OR_RETURN(bias_, arena.allocate_array<LogitBias>(kMaxLogitBias, ArenaPurpose::Scratch, 64));
  draft_room_ = plan.draft_tokens;
  if (draft_room_ > 0) {  // as session_draft_bytes counts them
    TERN_ASSIGN_OR_RETURN(verify_tokens_,
                          arena.allocate_array<int32_t>(static_cast<size_t>(draft_room_) + 1, ArenaPurpose::Scratch, 64));
    TERN_ASSIGN_OR_RETURN(draft_probs_, arena.allocate_array<float>(static_cast<size_t>(draft_room_) * model.config().vocab,
                                                                    ArenaPurpose::Scratch, 64));
  }
  if (plan.grammar_bytes > 0) {  // as session_grammar_bytes counts it
    grammar_memory_bytes_ = plan.grammar_bytes;
    TERN_ASSIGN_OR_RETURN(grammar_memory_, arena.allocate(grammar_memory_bytes_, 64, ArenaPurpose::Sampler));
  }
  TERN_RETURN_IF_ERROR(validate(sampler));
  SamplerParams checked = sampler;
  // Ids past the tokenizer (padded embedding rows) can never be turned into text: do not sample them.
  uint32_t sample_vocab = model.config().vocab;
  if (const Tokenizer* t = model.tokenizer(); t != nullptr && t->vocab_size() > 0 &&
                                              static_cast<uint32_t>(t->vocab_size()) < sample_vocab) {
    sample_vocab = static_cast<uint32_t>(t->vocab_size());
  }
  TERN_RETURN_IF_ERROR(sampler_.init(sample_vocab, arena));
  return sampler_.configure(checked);
}

// The rest of init() for an embedding model: the batch assembly and pooling buffers, as
// session_embed_bytes counts them; no sampler (it never decodes).
Error Session::init_embedding(Model& model, const SamplerParams& sampler, ArenaAllocator& arena) {
  const uint32_t batch = model.plan().batch_tokens;
  TERN_ASSIGN_OR_RETURN(embed_tokens_, arena.allocate_array<int32_t>(batch, ArenaPurpose::Scratch, 64));
  TERN_ASSIGN_OR_RETURN(embed_segments_, arena.allocate_array<uint32_t>(batch, ArenaPurpose::Scratch, 64));
  TERN_ASSIGN_OR_RETURN(embed_texts_, arena.allocate_array<uint32_t>(batch, ArenaPurpose::Scratch, 64));
  TERN_ASSIGN_OR_RETURN(embed_pool_, arena.allocate_array<float>(model.config().hidden, ArenaPurpose::Scratch, 64));
  TERN_ASSIGN_OR_RETURN(embed_row_, arena.allocate_array<float>(model.config().hidden, ArenaPurpose::Scratch, 64));
  embed_text_bytes_ = embed_text_bytes(context_);
  TERN_ASSIGN_OR_RETURN(embed_text_, arena.allocate_array<char>(embed_text_bytes_, ArenaPurpose::Scratch, 64));
  TERN_RETURN_IF_ERROR(validate(sampler));
  return sampler_.configure(sampler);
}

Session::~Session() {
  if (draft_ != nullptr) draft_->model().destroy_session(draft_);
}

void Session::append_history(const int32_t* tokens, uint32_t n) {
  if (history_len_ + n > history_capacity_) {
    // Slide: keep the newest tokens (at least context_ of them, since n <= batch <= context_).
    const uint32_t keep = history_capacity_ - n < history_len_ ? history_capacity_ - n : history_len_;
    std::memmove(history_, history_ + (history_len_ - keep), keep * sizeof(int32_t));
    history_len_ = keep;
  }
  std::memcpy(history_ + history_len_, tokens, n * sizeof(int32_t));
  history_len_ += n;
}

Error Session::prefill(const int32_t* tokens, size_t count) {
  TERN_CHECK_OR_RETURN(!model_->config().embedding, Error::NotSupported,
                       "an embedding model has no next-token logits: embed texts instead");
  TERN_CHECK_OR_RETURN(tokens != nullptr || count == 0, Error::InvalidArgument, "prefill with null tokens");
  TERN_CHECK_OR_RETURN(!needs_reset_, Error::InvalidState,
                       "an earlier failed batch left the KV cache inconsistent; reset the session");
  if (count == 0) return Error::Ok;
  if (!evicting_ && count > context_ - position_) {
    return fail(Error::PromptTooLong,
                "%zu tokens do not fit: %u of the %u-token context are free (KV eviction is off)", count,
                context_ - position_, context_);
  }
  if (evicting_ && count > UINT32_MAX - position_) {
    return fail(Error::PromptTooLong, "%zu tokens after position %u pass the last position 2^32-1", count, position_);
  }
  const uint32_t vocab = model_->config().vocab;
  for (size_t i = 0; i < count; ++i) {
    TERN_CHECK_OR_RETURN(tokens[i] >= 0 && static_cast<uint32_t>(tokens[i]) < vocab, Error::InvalidToken,
                         "token %d at index %zu is outside the vocabulary of %u", tokens[i], i, vocab);
  }
  size_t done = 0;
  while (done < count) {
    const uint32_t n = static_cast<uint32_t>(count - done < scratch_.batch ? count - done : scratch_.batch);
    const bool last = done + n == count;
    const Error e = forward(*model_, *kv_, scratch_, tokens + done, n, position_, last, &abort_);
    if (e != Error::Ok) {
      // Positions already written stay valid; the failed batch is dropped (a compressed
      // cache forgets the positions it wrote, or the session must be reset).
      has_logits_ = false;
      if (kv_->rollback_to(position_) != Error::Ok) needs_reset_ = true;
      return e;
    }
    append_history(tokens + done, n);
    position_ += n;
    done += n;
  }
  has_logits_ = true;
  return Error::Ok;
}

Error Session::decode(int32_t token) {
  if (!evicting_ && position_ >= context_) {
    return fail(Error::ContextFull, "the %u-token context is full (KV eviction is off); reset the session", context_);
  }
  return prefill(&token, 1);
}

Result<int32_t> Session::sample() {
  if (!has_logits_) return fail(Error::InvalidState, "sample before any prefill or decode");
  TERN_ASSIGN_OR_RETURN(const int32_t token, sample_from(scratch_.logits));
  if (grammar_.compiled()) TERN_RETURN_IF_ERROR(grammar_.accept_token(token));
  return token;
}

Result<const float*> Session::steered_logits(const float* logits, const Grammar::State* state) {
  const bool constrained = grammar_.compiled();
  if (bias_count_ == 0 && hook_ == nullptr && !constrained) return logits;
  const uint32_t vocab = model_->config().vocab;
  std::memcpy(biased_logits_, logits, vocab * sizeof(float));
  for (size_t i = 0; i < bias_count_; ++i) biased_logits_[bias_[i].token] += bias_[i].bias;
  if (hook_ != nullptr) hook_(biased_logits_, vocab, history_, history_len_, hook_user_);
  if (constrained) {
    TERN_ASSIGN_OR_RETURN(const uint32_t left,
                          grammar_.mask_logits(state != nullptr ? *state : grammar_.state(), biased_logits_));
    TERN_CHECK_OR_RETURN(left > 0, Error::InvalidState,
                         "the grammar allows no token here that the logit bias and hook left possible");
  }
  return static_cast<const float*>(biased_logits_);
}

Result<int32_t> Session::sample_from(const float* logits, const Grammar::State* state) {
  TERN_ASSIGN_OR_RETURN(const float* steered, steered_logits(logits, state));
  return sampler_.sample(steered, history_, history_len_);
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

namespace {
uint64_t text_hash(const char* text, size_t size) { return fnv1a(text, size); }
}  // namespace

Error Session::set_grammar(const char* text, size_t size) {
  if (text == nullptr) {
    grammar_.clear();
    grammar_size_ = 0;
    return Error::Ok;
  }
  TERN_CHECK_OR_RETURN(grammar_memory_ != nullptr, Error::InvalidState,
                       "the model was loaded without grammar memory: set tern_model_params.grammar_bytes (e.g. "
                       "8 MiB for a 128k-token vocabulary)");
  const uint64_t hash = text_hash(text, size);
  if (grammar_.compiled() && hash == grammar_hash_ && size == grammar_size_) {
    grammar_.restart();
    return Error::Ok;
  }
  grammar_size_ = 0;
  TERN_RETURN_IF_ERROR(grammar_.compile(text, size, model_->grammar_vocab(), grammar_memory_, grammar_memory_bytes_));
  grammar_hash_ = hash;
  grammar_size_ = size;
  return Error::Ok;
}

Error Session::set_logit_bias(const LogitBias* entries, size_t count) {
  TERN_CHECK_OR_RETURN(bias_ != nullptr, Error::NotSupported, "an embedding model has no logits to bias");
  TERN_CHECK_OR_RETURN(entries != nullptr || count == 0, Error::InvalidArgument, "logit bias: null entries");
  TERN_CHECK_OR_RETURN(count <= kMaxLogitBias, Error::InvalidArgument, "%zu logit bias entries (at most %zu)", count,
                       kMaxLogitBias);
  const uint32_t vocab = model_->config().vocab;
  for (size_t i = 0; i < count; ++i) {
    TERN_CHECK_OR_RETURN(entries[i].token >= 0 && static_cast<uint32_t>(entries[i].token) < vocab,
                         Error::InvalidToken, "logit bias entry %zu: token %d outside the vocabulary of %u", i,
                         entries[i].token, vocab);
    TERN_CHECK_OR_RETURN(!std::isnan(entries[i].bias) && entries[i].bias != INFINITY, Error::InvalidArgument,
                         "logit bias entry %zu: bias %g (finite, or -inf to ban)", i, entries[i].bias);
  }
  if (count > 0) std::memcpy(bias_, entries, count * sizeof(LogitBias));
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
  const int32_t token = history_[history_len_ - 1];
  const Error e = forward(*model_, *kv_, scratch_, &token, 1, last, true, &abort_);
  if (e != Error::Ok) {
    has_logits_ = false;
    needs_reset_ = kv_->rollback_to(last) != Error::Ok;
    return e;
  }
  has_logits_ = true;
  return Error::Ok;
}

Error Session::set_draft_tokens(uint32_t k) {
  TERN_CHECK_OR_RETURN(k <= draft_room_, Error::InvalidArgument,
                       "%u draft tokens: the model was loaded with room for %u (draft_tokens)", k, draft_room_);
  draft_max_ = k;
  return Error::Ok;
}

bool Session::drafting() const {
  // Verification scores each position's logits as they are before any draft is accepted;
  // the choice must not depend on tokens not yet accepted (penalties, a hook reading history).
  const SamplerParams& p = sampler_.params();
  return draft_max_ > 0 && p.repeat_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f &&
         hook_ == nullptr;
}

uint32_t Session::lookup_drafts(int32_t token, uint32_t max, int32_t* out) const {
  // The text so far is history_ followed by `token`.
  const uint32_t n = history_len_ + 1;
  auto at = [&](uint32_t i) { return i < history_len_ ? history_[i] : token; };
  for (uint32_t ngram = 3; ngram >= 1; --ngram) {
    if (n < ngram + 1) continue;
    // The latest earlier occurrence of the last `ngram` tokens with a token after it.
    for (uint32_t start = n - ngram; start-- > 0;) {
      uint32_t j = 0;
      while (j < ngram && at(start + j) == at(n - ngram + j)) ++j;
      if (j < ngram) continue;
      uint32_t count = 0;
      for (uint32_t i = start + ngram; i < n && count < max; ++i) out[count++] = at(i);
      return count;
    }
  }
  return 0;
}

Error Session::decode_drafting(int32_t token, uint32_t max_drafts, GenerateStats& stats) {
  const uint32_t p0 = position_;
  uint32_t limit = max_drafts < draft_max_ ? max_drafts : draft_max_;
  if (limit + 1 > scratch_.batch) limit = scratch_.batch - 1;
  // The whole batch must be written without reshaping the cache (exact attention and roll-back)
  // and, without eviction, within the context.
  const uint32_t room = kv_->exact_append_room();
  if (limit + 1 > room) limit = room > 0 ? room - 1 : 0;
  if (!evicting_ && limit + 1 > context_ - p0) limit = context_ - p0 - 1;
  const bool sampling = sampler_.params().temperature > 0.0f;
  uint32_t k = 0;
  if (limit > 0) {
    k = draft_ != nullptr ? draft_model_drafts(token, limit, sampling) : lookup_drafts(token, limit, verify_tokens_ + 1);
  }
  // Prompt lookup's drafts stop where the grammar would refuse them (a draft model's are
  // drawn under its mask already).
  if (k > 0 && draft_ == nullptr) {
    TERN_ASSIGN_OR_RETURN(k, grammar_cut(verify_tokens_ + 1, k));
  }
  if (k == 0) return decode(token);
  auto accepted = verify_batch(token, verify_tokens_ + 1, k, sampling, draft_ != nullptr ? draft_probs_ : nullptr);
  if (draft_ != nullptr) draft_->drop_after(position_);  // the draft ran drafts the target may have rejected
  if (!accepted.ok()) return accepted.error();
  pending_count_ = *accepted;
  pending_next_ = 0;
  stats.drafted_tokens += k;
  stats.accepted_tokens += *accepted;
  ++stats.verify_steps;
  return Error::Ok;
}

Result<uint32_t> Session::verify_drafts(int32_t token, const int32_t* drafts, uint32_t k) {
  return verify_batch(token, drafts, k, false, nullptr);
}

Result<uint32_t> Session::verify_batch(int32_t token, const int32_t* drafts, uint32_t k, bool sampling,
                                       const float* q_rows) {
  TERN_CHECK_OR_RETURN(!needs_reset_, Error::InvalidState,
                       "an earlier failed batch left the KV cache inconsistent; reset the session");
  TERN_CHECK_OR_RETURN(k > 0 && k <= draft_max_ && k + 1 <= scratch_.batch && drafts != nullptr, Error::InvalidArgument,
                       "verify %u drafts: 1 to %u (draft_tokens)", k, draft_max_);
  const uint32_t p0 = position_;
  TERN_CHECK_OR_RETURN(k + 1 <= kv_->exact_append_room() && (evicting_ || k + 1 <= context_ - p0),
                       Error::OutOfRange, "verify %u drafts at position %u: no room to roll back exactly", k, p0);
  const uint32_t vocab = model_->config().vocab;
  for (uint32_t i = 0; i <= k; ++i) {
    const int32_t t = i == 0 ? token : drafts[i - 1];
    TERN_CHECK_OR_RETURN(t >= 0 && static_cast<uint32_t>(t) < vocab, Error::InvalidToken,
                         "token %d is outside the vocabulary of %u", t, vocab);
  }
  if (drafts != verify_tokens_ + 1) std::memmove(verify_tokens_ + 1, drafts, k * sizeof(int32_t));
  verify_tokens_[0] = token;
  forced_next_ = -1;
  // With a grammar, row i is scored under its state after drafts[0, i) (the draft slots).
  // Drafts past one it refuses can never be kept: unless a draft model's distribution needs
  // that row's rejection draw, they are not run.
  const bool constrained = grammar_.compiled();
  if (constrained) {
    TERN_ASSIGN_OR_RETURN(const uint32_t allowed, grammar_cut(verify_tokens_ + 1, k));
    if (!(sampling && q_rows != nullptr)) k = allowed;
  }
  auto row_state = [&](uint32_t i) { return constrained ? &grammar_.draft_state(i) : nullptr; };
  const Error e = forward(*model_, *kv_, scratch_, verify_tokens_, k + 1, p0, false, &abort_);
  if (e != Error::Ok) {
    has_logits_ = false;
    if (kv_->rollback_to(p0) != Error::Ok) needs_reset_ = true;
    return e;
  }
  // Row i's logits follow verify_tokens_[i]. Rows are scored one at a time up to the first
  // rejection, so the lm_head (the largest matrix) runs once per token kept, as decoding them
  // one by one would, plus once for the row that decides the next token; the last scored
  // row's logits are the session's. Greedy: draft i + 1 stands if it is the row's choice.
  // Sampling: speculative_accept on the row's distribution p (the sampler's, after the logit
  // bias) and the draft's q; a rejection draws the next token, which generate() emits.
  const uint32_t sample_vocab = sampler_.vocab();
  uint32_t accepted = 0;
  for (;;) {
    forward_row_logits(*model_, scratch_, accepted, scratch_.logits);
    if (accepted == k) break;
    const int32_t draft = verify_tokens_[1 + accepted];
    if (sampling) {
      float* p = biased_logits_;  // probabilities() reads all of the logits before writing p
      auto steered = steered_logits(scratch_.logits, row_state(accepted));
      if (!steered.ok()) {
        has_logits_ = false;
        if (kv_->rollback_to(p0) != Error::Ok) needs_reset_ = true;
        return steered.error();
      }
      sampler_.probabilities(*steered, history_, history_len_, p);
      const float* q = q_rows != nullptr ? q_rows + static_cast<size_t>(accepted) * sample_vocab : nullptr;
      const int32_t kept = speculative_accept(p, q, sample_vocab, draft, sampler_.rng());
      if (kept != draft) {
        forced_next_ = kept;
        break;
      }
    } else {
      auto choice = sample_from(scratch_.logits, row_state(accepted));
      if (!choice.ok()) {
        has_logits_ = false;
        if (kv_->rollback_to(p0) != Error::Ok) needs_reset_ = true;
        return choice.error();
      }
      if (*choice != draft) break;
    }
    ++accepted;
  }
  TERN_RETURN_IF_ERROR(kv_->rollback_to(p0 + 1 + accepted));
  append_history(verify_tokens_, 1 + accepted);
  position_ = p0 + 1 + accepted;
  has_logits_ = true;
  if (constrained) {
    TERN_RETURN_IF_ERROR(grammar_.commit_draft(accepted));
    if (forced_next_ >= 0) TERN_RETURN_IF_ERROR(grammar_.accept_token(forced_next_));
  }
  return accepted;
}

void Session::drop_after(uint32_t n) {
  if (n >= position_) return;
  pending_count_ = pending_next_ = 0;
  if (!needs_reset_ && kv_->rollback_is_exact(n) && n >= position_ - history_len_ && kv_->rollback_to(n) == Error::Ok) {
    history_len_ -= position_ - n;
    position_ = n;
    has_logits_ = false;
    return;
  }
  reset();
}

bool Session::draft_catch_up(const int32_t* token) {
  Session& d = *draft_;
  if (d.needs_reset_ || d.position_ > position_) d.reset();
  // The draft holds a prefix of our text; it runs what it lacks (from our history) and `token`.
  const uint32_t extra = token != nullptr ? 1 : 0;
  const uint32_t behind = position_ - d.position_;
  if (behind > history_len_) return false;  // our history no longer holds what it lacks
  if (behind + extra == 0) return true;
  if (!d.evicting_ && behind + extra > d.context_ - d.position_) return false;  // its context is full
  const int32_t* missing = history_ + (history_len_ - behind);
  Error e = Error::Ok;
  if (behind + extra <= d.context_) {
    std::memcpy(d.prompt_, missing, behind * sizeof(int32_t));
    if (token != nullptr) d.prompt_[behind] = *token;
    e = d.prefill(d.prompt_, behind + extra);
  } else {
    e = d.prefill(missing, behind);
    if (e == Error::Ok && token != nullptr) e = d.decode(*token);
  }
  if (e != Error::Ok) {
    d.reset();
    return false;
  }
  return true;
}

uint32_t Session::draft_model_drafts(int32_t token, uint32_t max, bool sampling) {
  Session& d = *draft_;
  if (!draft_catch_up(&token)) return 0;
  // The first k - 1 drafts run through the draft model (the last is only chosen); rolling
  // them back must be exact.
  uint32_t k = max;
  const uint32_t room = d.kv_->exact_append_room();
  if (k - 1 > room) k = room + 1;
  if (!d.evicting_ && k - 1 > d.context_ - d.position_) k = d.context_ - d.position_ + 1;
  const uint32_t vocab = sampler_.vocab();
  // With a grammar the drafts are drawn under its mask, stepping its draft slots.
  const bool constrained = grammar_.compiled();
  if (constrained) grammar_.begin_drafts();
  for (uint32_t i = 0; i < k; ++i) {
    const float* logits = d.scratch_.logits;
    if (constrained) {
      std::memcpy(biased_logits_, logits, vocab * sizeof(float));
      auto left = grammar_.mask_logits(grammar_.draft_state(i), biased_logits_);
      if (!left.ok() || *left == 0) {
        d.drop_after(position_);
        return i;
      }
      logits = biased_logits_;
    }
    int32_t x;
    if (sampling) {
      // q: the target's sampler transforms on the draft's logits (the same ones p gets).
      float* q = draft_probs_ + static_cast<size_t>(i) * vocab;
      sampler_.probabilities(logits, nullptr, 0, q);
      x = draw_from(q, vocab, sampler_.rng());
    } else {
      x = sampler_.sample(logits, nullptr, 0);  // greedy: no penalties while drafting
    }
    verify_tokens_[1 + i] = x;
    if (constrained) {
      auto allowed = grammar_.step_draft(i, x);
      if (!allowed.ok() || !*allowed) {
        d.drop_after(position_);
        return i;
      }
    }
    if (i + 1 < k && d.decode(x) != Error::Ok) {
      d.drop_after(position_);
      return i + 1;
    }
  }
  return k;
}

Error Session::set_draft_model(Model* draft) {
  auto release = [this] {
    if (draft_ != nullptr) draft_->model().destroy_session(draft_);
    draft_ = nullptr;
  };
  if (draft == nullptr) {
    release();
    return Error::Ok;
  }
  TERN_CHECK_OR_RETURN(draft != model_, Error::InvalidArgument,
                       "the draft model is the session's own model (load a smaller one to draft)");
  const Tokenizer* mine = model_->tokenizer();
  const Tokenizer* theirs = draft->tokenizer();
  TERN_CHECK_OR_RETURN(mine != nullptr && theirs != nullptr, Error::InvalidArgument,
                       "draft model: both models need a bundle's tokenizer");
  TERN_CHECK_OR_RETURN(mine->kind() == theirs->kind() && mine->vocab_size() == theirs->vocab_size(),
                       Error::InvalidArgument,
                       "draft model: its tokenizer differs (%d tokens, kind %d; this model's has %d, kind %d)",
                       theirs->vocab_size(), static_cast<int>(theirs->kind()), mine->vocab_size(),
                       static_cast<int>(mine->kind()));
  TERN_CHECK_OR_RETURN(mine->bos_id() == theirs->bos_id() && mine->eos_id() == theirs->eos_id() &&
                           mine->eot_id() == theirs->eot_id() && mine->unk_id() == theirs->unk_id(),
                       Error::InvalidArgument, "draft model: its tokenizer's special tokens differ");
  for (int32_t id = 0; id < mine->vocab_size(); ++id) {
    const PieceView a = mine->piece(id), b = theirs->piece(id);
    TERN_CHECK_OR_RETURN(a.size == b.size && std::memcmp(a.data, b.data, a.size) == 0 &&
                             mine->is_control(id) == theirs->is_control(id),
                         Error::InvalidArgument, "draft model: its tokenizer differs at token %d ('%.*s', here '%.*s')",
                         id, static_cast<int>(b.size), b.data, static_cast<int>(a.size), a.data);
  }
  SamplerParams greedy;  // the draft's own sampler is not used: drafts come from this session's
  greedy.temperature = 0.0f;
  release();  // checked: now its slot may go to the new draft (the same model again)
  TERN_ASSIGN_OR_RETURN(Session* d, draft->create_session(greedy));
  if (d->sampler_.vocab() != sampler_.vocab()) {
    const uint32_t theirs_vocab = d->sampler_.vocab();
    draft->destroy_session(d);
    return fail(Error::InvalidArgument, "draft model: it samples %u tokens, this model %u", theirs_vocab,
                sampler_.vocab());
  }
  draft_ = d;
  return Error::Ok;
}

Error Session::truncate(uint32_t n) {
  TERN_CHECK_OR_RETURN(n <= position_, Error::InvalidArgument, "truncate to %u tokens: the session holds %u", n,
                       position_);
  TERN_CHECK_OR_RETURN(!needs_reset_, Error::InvalidState,
                       "an earlier failed batch left the KV cache inconsistent; reset the session");
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
  std::memcpy(prompt_, history_, n * sizeof(int32_t));
  position_ = 0;
  history_len_ = 0;
  has_logits_ = false;
  kv_->reset();
  return prefill(prompt_, n);
}

namespace {

// A saved session: this header, then the token history, the logits (when there are any) and
// the KV cache's state. Same-endian devices only (every platform Tern targets is little-endian).
constexpr char kStateMagic[8] = {'T', 'E', 'R', 'N', 'S', 'E', 'S', 'S'};
// 2: the checksum covers the header too, so a damaged sampler field or RNG state is caught
// (1, still read: the payload only).
constexpr uint32_t kStateVersion = 2;

struct StateHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  uint64_t bundle_identity;
  uint64_t kv_layout_identity;
  char kv_mode[32];
  uint32_t vocab;
  uint32_t capacity;
  uint32_t position;
  uint32_t history_len;
  uint32_t has_logits;
  int32_t top_k;
  int32_t repeat_last_n;
  float temperature, top_p, min_p, repeat_penalty, presence_penalty, frequency_penalty;
  uint32_t reserved;
  uint64_t seed;
  uint64_t rng[4];
  uint64_t kv_bytes;
  uint64_t payload_bytes;
  uint64_t payload_checksum;  // FNV-1a 64 of the header (this field zero) and the payload
};

uint64_t state_checksum(const StateHeader& h, const uint8_t* payload) {
  if (h.version == 1) return fnv1a(payload, h.payload_bytes);
  StateHeader zeroed = h;
  zeroed.payload_checksum = 0;
  return fnv1a(payload, h.payload_bytes, fnv1a(&zeroed, sizeof zeroed));
}

}  // namespace

size_t Session::state_size() const {
  return sizeof(StateHeader) + static_cast<size_t>(history_len_) * sizeof(int32_t) +
         (has_logits_ ? static_cast<size_t>(model_->config().vocab) * sizeof(float) : 0) +
         kv_->state_bytes(position_ < context_ ? position_ : context_);
}

Result<size_t> Session::save_state(void* buf, size_t capacity) const {
  TERN_CHECK_OR_RETURN(!needs_reset_, Error::InvalidState,
                       "an earlier failed batch left the KV cache inconsistent; nothing to save");
  const size_t size = state_size();
  TERN_CHECK_OR_RETURN(buf != nullptr && capacity >= size, Error::OutOfRange,
                       "session state needs %zu bytes, the buffer has %zu", size, buf == nullptr ? 0 : capacity);
  uint8_t* out = static_cast<uint8_t*>(buf);
  StateHeader h;
  std::memset(&h, 0, sizeof h);
  std::memcpy(h.magic, kStateMagic, sizeof h.magic);
  h.version = kStateVersion;
  h.header_bytes = sizeof h;
  h.bundle_identity = model_->bundle_identity();
  h.kv_layout_identity = model_->kv_layout_identity();
  std::snprintf(h.kv_mode, sizeof h.kv_mode, "%s", model_->kv_mode());
  h.vocab = model_->config().vocab;
  h.capacity = context_;
  h.position = position_;
  h.history_len = history_len_;
  h.has_logits = has_logits_ ? 1 : 0;
  const SamplerParams& sp = sampler_.params();
  h.top_k = sp.top_k;
  h.repeat_last_n = sp.repeat_last_n;
  h.temperature = sp.temperature, h.top_p = sp.top_p, h.min_p = sp.min_p, h.repeat_penalty = sp.repeat_penalty;
  h.presence_penalty = sp.presence_penalty, h.frequency_penalty = sp.frequency_penalty;
  h.seed = sp.seed;
  sampler_.rng().get_state(h.rng);
  const uint32_t kv_positions = position_ < context_ ? position_ : context_;
  h.kv_bytes = kv_->state_bytes(kv_positions);
  h.payload_bytes = size - sizeof h;
  uint8_t* payload = out + sizeof h;
  uint8_t* p = payload;
  std::memcpy(p, history_, static_cast<size_t>(history_len_) * sizeof(int32_t));
  p += static_cast<size_t>(history_len_) * sizeof(int32_t);
  if (has_logits_) {
    std::memcpy(p, scratch_.logits, static_cast<size_t>(h.vocab) * sizeof(float));
    p += static_cast<size_t>(h.vocab) * sizeof(float);
  }
  kv_->save_state(position_, p);
  h.payload_checksum = state_checksum(h, payload);
  std::memcpy(out, &h, sizeof h);
  return size;
}

Error Session::load_state(const void* buf, size_t size) {
  TERN_CHECK_OR_RETURN(!model_->config().embedding, Error::NotSupported, "an embedding session holds no state");
  TERN_CHECK_OR_RETURN(buf != nullptr || size == 0, Error::InvalidArgument, "session state: null buffer");
  StateHeader h;
  TERN_CHECK_OR_RETURN(size >= sizeof h, Error::Truncated, "session state of %zu bytes is shorter than its header (%zu)",
                       size, sizeof h);
  std::memcpy(&h, buf, sizeof h);
  TERN_CHECK_OR_RETURN(std::memcmp(h.magic, kStateMagic, sizeof h.magic) == 0, Error::BadMagic,
                       "not a Tern session state (bad magic)");
  TERN_CHECK_OR_RETURN((h.version == kStateVersion || h.version == 1) && h.header_bytes == sizeof h,
                       Error::VersionMismatch,
                       "session state version %u (header %u bytes); this build reads version %u", h.version,
                       h.header_bytes, kStateVersion);
  TERN_CHECK_OR_RETURN(h.payload_bytes == size - sizeof h, Error::Truncated,
                       "session state holds %zu payload bytes, its header says %llu", size - sizeof h,
                       static_cast<unsigned long long>(h.payload_bytes));
  const uint8_t* payload = static_cast<const uint8_t*>(buf) + sizeof h;
  TERN_CHECK_OR_RETURN(state_checksum(h, payload) == h.payload_checksum, Error::CorruptFile,
                       "session state is damaged (checksum mismatch)");
  TERN_CHECK_OR_RETURN(h.bundle_identity == model_->bundle_identity(), Error::InvalidArgument,
                       "the session state was saved with another bundle");
  h.kv_mode[sizeof h.kv_mode - 1] = '\0';
  TERN_CHECK_OR_RETURN(h.kv_layout_identity == model_->kv_layout_identity() && h.capacity == context_,
                       Error::InvalidArgument,
                       "the session state was saved with KV mode %s and a %u-token cache; this session has %s with %u",
                       h.kv_mode, h.capacity, model_->kv_mode(), context_);
  const uint32_t vocab = model_->config().vocab;
  const size_t logits_bytes = h.has_logits ? static_cast<size_t>(vocab) * sizeof(float) : 0;
  const size_t history_bytes = static_cast<size_t>(h.history_len) * sizeof(int32_t);
  TERN_CHECK_OR_RETURN(h.vocab == vocab && h.history_len <= history_capacity_ && h.history_len <= h.position &&
                           (evicting_ || h.position <= context_) &&
                           h.kv_bytes <= h.payload_bytes && history_bytes + logits_bytes == h.payload_bytes - h.kv_bytes,
                       Error::CorruptFile, "session state: position %u, %u history tokens and %llu KV bytes do not fit",
                       h.position, h.history_len, static_cast<unsigned long long>(h.kv_bytes));
  SamplerParams sp;
  sp.top_k = h.top_k, sp.repeat_last_n = h.repeat_last_n, sp.temperature = h.temperature, sp.top_p = h.top_p;
  sp.min_p = h.min_p, sp.repeat_penalty = h.repeat_penalty, sp.presence_penalty = h.presence_penalty;
  sp.frequency_penalty = h.frequency_penalty, sp.seed = h.seed;
  TERN_RETURN_IF_ERROR(validate(sp));
  const uint8_t* p = payload;
  for (uint32_t i = 0; i < h.history_len; ++i) {
    int32_t t;
    std::memcpy(&t, p + i * sizeof(int32_t), sizeof t);
    TERN_CHECK_OR_RETURN(t >= 0 && static_cast<uint32_t>(t) < vocab, Error::CorruptFile,
                         "session state: history token %d outside the vocabulary", t);
  }
  // Everything checked that can be without touching the session; the cache's own checks
  // come last (a failure there leaves the session reset).
  const uint32_t kv_positions = h.position < context_ ? h.position : context_;
  const Error e = kv_->load_state(evicting_ ? h.position : kv_positions, p + history_bytes + logits_bytes, h.kv_bytes);
  if (e != Error::Ok) {
    reset();
    return e;
  }
  std::memcpy(history_, p, history_bytes);
  history_len_ = h.history_len;
  position_ = h.position;
  has_logits_ = h.has_logits != 0;
  if (has_logits_) std::memcpy(scratch_.logits, p + history_bytes, logits_bytes);
  needs_reset_ = false;
  forced_next_ = -1;
  grammar_.restart();  // a grammar's state is not saved: it starts again
  if (draft_ != nullptr) draft_->reset();  // it catches up from the history when it next drafts
  (void)sampler_.configure(sp);
  sampler_.rng().set_state(h.rng);
  return Error::Ok;
}

namespace {

// Holds back generated text that could still become a stop string, so a stop string is
// never emitted (even partly) and everything else is emitted as early as possible.
class StopStringFilter {
 public:
  StopStringFilter(const char* const* stops, size_t count) : stops_(stops), count_(count) {}

  // Appends text; returns true when a stop string completed (text before it is emitted).
  bool push(const char* text, size_t size, PieceCallback emit, void* user, bool* callback_stop) {
    for (size_t i = 0; i < size; ++i) {
      if (size_ == sizeof pending_) flush_bytes(1, emit, user, callback_stop);
      pending_[size_++] = text[i];
      for (size_t s = 0; s < count_; ++s) {
        const size_t n = std::strlen(stops_[s]);
        if (n > 0 && n <= size_ && std::memcmp(pending_ + size_ - n, stops_[s], n) == 0) {
          flush_bytes(size_ - n, emit, user, callback_stop);
          size_ = 0;
          return true;
        }
      }
    }
    // Keep the longest tail that is a proper prefix of some stop string.
    size_t keep = 0;
    for (size_t s = 0; s < count_; ++s) {
      const size_t n = std::strlen(stops_[s]);
      for (size_t k = n > size_ ? size_ : n - 1; k > keep; --k) {
        if (std::memcmp(pending_ + size_ - k, stops_[s], k) == 0) {
          keep = k;
          break;
        }
      }
    }
    flush_bytes(size_ - keep, emit, user, callback_stop);
    return false;
  }
  void finish(PieceCallback emit, void* user, bool* callback_stop) { flush_bytes(size_, emit, user, callback_stop); }

 private:
  void flush_bytes(size_t n, PieceCallback emit, void* user, bool* callback_stop) {
    if (n == 0) return;
    if (emit != nullptr && !*callback_stop && !emit(pending_, n, user)) *callback_stop = true;
    std::memmove(pending_, pending_ + n, size_ - n);
    size_ -= n;
  }

  const char* const* stops_;
  size_t count_;
  char pending_[2 * kMaxStopStringBytes + 64];
  size_t size_ = 0;
};

}  // namespace

Error Session::generate(const char* prompt, size_t prompt_size, const GenerateOptions& options,
                        PieceCallback on_piece, void* user_data, GenerateStats* stats) {
  GenerateStats local;
  GenerateStats& st = stats != nullptr ? *stats : local;
  st = GenerateStats{};
  Tokenizer* tokenizer = model_->tokenizer();
  TERN_CHECK_OR_RETURN(tokenizer != nullptr, Error::InvalidState, "the model has no tokenizer (not from a bundle)");
  TERN_CHECK_OR_RETURN(prompt != nullptr || prompt_size == 0, Error::InvalidArgument, "null prompt");
  TERN_CHECK_OR_RETURN(options.stop_string_count <= kMaxStopStrings, Error::InvalidArgument,
                       "%zu stop strings (at most %zu)", options.stop_string_count, kMaxStopStrings);
  for (size_t i = 0; i < options.stop_string_count; ++i) {
    TERN_CHECK_OR_RETURN(options.stop_strings != nullptr && options.stop_strings[i] != nullptr &&
                             std::strlen(options.stop_strings[i]) <= kMaxStopStringBytes,
                         Error::InvalidArgument, "stop string %zu is null or longer than %zu bytes", i,
                         kMaxStopStringBytes);
  }

  const uint64_t t0 = monotonic_ns();
  const uint32_t free_positions = evicting_ ? context_ : context_ - position_;
  size_t needed = 0;
  auto encoded = model_->encode(prompt, prompt_size, options.add_bos && position_ == 0, options.parse_special,
                                   prompt_, free_positions, &needed);
  if (!encoded.ok()) {
    if (encoded.error() == Error::OutOfRange) {
      return fail(Error::PromptTooLong, "the prompt is %zu tokens; %u of the %u-token context are free", needed,
                  free_positions, context_);
    }
    return encoded.error();
  }
  const size_t prompt_tokens = *encoded;
  TERN_CHECK_OR_RETURN(prompt_tokens > 0 || position_ > 0, Error::InvalidArgument,
                       "empty prompt on an empty session: nothing to condition on");
  TERN_RETURN_IF_ERROR(prefill(prompt_, prompt_tokens));
  // A draft model runs the prompt now, with the target's (counted as prefill time).
  if (draft_ != nullptr && drafting()) (void)draft_catch_up(nullptr);
  st.prompt_tokens = static_cast<uint32_t>(prompt_tokens);
  const uint64_t t1 = monotonic_ns();
  st.prefill_seconds = seconds_between(t0, t1);

  TokenDecoder decoder(*tokenizer);
  // Each call's text is one sentence of the grammar, decoded as the grammar reads tokens
  // (after other text: SentencePiece keeps the first piece's space).
  if (grammar_.compiled()) {
    grammar_.restart();
    decoder.continue_text();
  }
  StopStringFilter filter(options.stop_strings, options.stop_string_count);
  bool callback_stop = false;
  char piece[512];
  Error result = Error::Ok;
  st.stop_reason = StopReason::MaxTokens;
  pending_count_ = pending_next_ = 0;
  forced_next_ = -1;
  const bool speculative = drafting();
  // With drafting, accepted drafts are already in the cache when they are emitted; where
  // token-by-token decoding would not have run them (a stop), they are rolled back after.
  uint32_t decoded_ahead = 0;
  for (uint32_t i = 0; i < options.max_new_tokens; ++i) {
    int32_t token;
    const bool predecoded = pending_count_ > 0;
    if (predecoded) {
      token = verify_tokens_[1 + pending_next_++];
      --pending_count_;
      decoded_ahead = pending_count_ + 1;
    } else if (forced_next_ >= 0) {  // a rejected draft's replacement, drawn by verification
      token = forced_next_;
      forced_next_ = -1;
    } else {
      if (grammar_.finished() && model_->grammar_vocab().end_token_count() == 0) {
        st.stop_reason = StopReason::EndOfGeneration;  // complete, and no end token to say so
        break;
      }
      auto next = sample();
      if (!next.ok()) {
        result = next.error();
        break;
      }
      token = *next;
    }
    ++st.generated_tokens;
    if (tokenizer->is_end_of_generation(token) || token == model_->config().eos_id ||
        (model_->config().eot_id >= 0 && token == model_->config().eot_id)) {
      st.stop_reason = StopReason::EndOfGeneration;
      // Keep the end-of-turn token in the context: a chat's next turn follows it.
      if (predecoded) {
        decoded_ahead = pending_count_;
        ++st.decoded_tokens;
      } else if ((evicting_ || position_ < context_) && decode(token) == Error::Ok) {
        ++st.decoded_tokens;
      }
      break;
    }
    auto bytes = decoder.push(token, piece, sizeof piece);
    if (!bytes.ok()) {
      result = bytes.error();
      break;
    }
    if (filter.push(piece, *bytes, on_piece, user_data, &callback_stop)) {
      st.stop_reason = StopReason::StopString;
      break;
    }
    if (callback_stop) {
      st.stop_reason = StopReason::Callback;
      break;
    }
    // Every emitted token goes into the context (the last one too), so a later generate()
    // or decode() continues from exactly the text the caller saw.
    if (predecoded) {  // verification left room for it within the context
      decoded_ahead = pending_count_;
      ++st.decoded_tokens;
      continue;
    }
    if (!evicting_ && position_ >= context_) {
      st.stop_reason = StopReason::ContextFull;
      break;
    }
    result = speculative ? decode_drafting(token, options.max_new_tokens - i - 1, st) : decode(token);
    if (result != Error::Ok) break;
    ++st.decoded_tokens;
  }
  pending_count_ = pending_next_ = 0;
  forced_next_ = -1;
  if (decoded_ahead > 0 && result == Error::Ok) result = truncate(position_ - decoded_ahead);
  if (result == Error::Ok && st.stop_reason != StopReason::StopString) {
    auto rest = decoder.flush(piece, sizeof piece);
    if (rest.ok() && filter.push(piece, *rest, on_piece, user_data, &callback_stop)) {
      st.stop_reason = StopReason::StopString;
    }
    filter.finish(on_piece, user_data, &callback_stop);
  }
  st.decode_seconds = seconds_between(t1, monotonic_ns());
  return result;
}

}  // namespace tern
