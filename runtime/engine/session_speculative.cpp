// Speculative decoding: drafts from prompt lookup or a draft model's session, verified in one
// batched forward pass and rolled back past the rejected ones.
#include "runtime/engine/session.h"

#include <cstring>

#include "runtime/engine/model.h"
#include "runtime/text/tokenizer.h"

namespace tern {

Error Session::set_draft_tokens(uint32_t k) {
  TERN_CHECK_OR_RETURN(k <= buffers_.draft_room, Error::InvalidArgument,
                       "%u draft tokens: the model was loaded with room for %u (draft_tokens)", k, buffers_.draft_room);
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
  // The text so far is buffers_.history followed by `token`.
  const uint32_t n = history_len_ + 1;
  auto at = [&](uint32_t i) { return i < history_len_ ? buffers_.history[i] : token; };
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
    k = draft_ != nullptr ? draft_model_drafts(token, limit, sampling)
                          : lookup_drafts(token, limit, buffers_.verify_tokens + 1);
  }
  // Prompt lookup's drafts stop where the grammar would refuse them (a draft model's are
  // drawn under its mask already).
  if (k > 0 && draft_ == nullptr) {
    TERN_ASSIGN_OR_RETURN(k, grammar_cut(buffers_.verify_tokens + 1, k));
  }
  if (k == 0) return decode(token);
  const float* q_rows = draft_ != nullptr ? buffers_.draft_probs : nullptr;
  auto accepted = verify_batch(token, buffers_.verify_tokens + 1, k, sampling, q_rows);
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
  TERN_RETURN_IF_ERROR(check_consistent());
  TERN_CHECK_OR_RETURN(k > 0 && k <= draft_max_ && k + 1 <= scratch_.batch && drafts != nullptr, Error::InvalidArgument,
                       "verify %u drafts: 1 to %u (draft_tokens)", k, draft_max_);
  const uint32_t p0 = position_;
  TERN_CHECK_OR_RETURN(k + 1 <= kv_->exact_append_room() && (evicting_ || k + 1 <= context_ - p0), Error::OutOfRange,
                       "verify %u drafts at position %u: no room to roll back exactly", k, p0);
  const uint32_t vocab = model_->config().vocab;
  for (uint32_t i = 0; i <= k; ++i) {
    const int32_t t = i == 0 ? token : drafts[i - 1];
    TERN_CHECK_OR_RETURN(t >= 0 && static_cast<uint32_t>(t) < vocab, Error::InvalidToken,
                         "token %d is outside the vocabulary of %u", t, vocab);
  }
  if (drafts != buffers_.verify_tokens + 1) std::memmove(buffers_.verify_tokens + 1, drafts, k * sizeof(int32_t));
  buffers_.verify_tokens[0] = token;
  forced_next_ = -1;
  // With a grammar, row i is scored under its state after drafts[0, i) (the draft slots).
  // Drafts past one it refuses can never be kept: unless a draft model's distribution needs
  // that row's rejection draw, they are not run.
  const bool constrained = grammar_.compiled();
  if (constrained) {
    TERN_ASSIGN_OR_RETURN(const uint32_t allowed, grammar_cut(buffers_.verify_tokens + 1, k));
    if (!(sampling && q_rows != nullptr)) k = allowed;
  }
  auto row_state = [&](uint32_t i) { return constrained ? &grammar_.draft_state(i) : nullptr; };
  // One pass through the model's queue (other sessions' steps may share it), with every
  // row's logits from one lm_head pass: reading that matrix once costs less than stopping at
  // the first rejection would save. Row i's logits follow buffers_.verify_tokens[i].
  ForwardSequence pass = sequence(buffers_.verify_tokens, k + 1);  // at p0, the position
  pass.row_logits = buffers_.verify_logits;
  model_->forward_queue().run(&pass, 1);
  if (pass.status != Error::Ok) return drop_failed_batch(p0, fail(pass.status, "%s", pass.message));
  // Greedy: draft i + 1 stands if it is row i's choice. Sampling: speculative_accept on the
  // row's distribution p (the sampler's, after the logit bias) and the draft's q; a rejection
  // draws the next token, which generate() emits. The last row looked at gives the session's
  // logits.
  const uint32_t sample_vocab = sampler_.vocab();
  uint32_t accepted = 0;
  for (;;) {
    const float* row = buffers_.verify_logits + static_cast<size_t>(accepted) * vocab;
    std::memcpy(scratch_.logits, row, vocab * sizeof(float));
    if (accepted == k) break;
    const int32_t draft = buffers_.verify_tokens[1 + accepted];
    if (sampling) {
      float* p = buffers_.biased_logits;  // probabilities() reads all of the logits before writing p
      auto steered = steered_logits(scratch_.logits, row_state(accepted));
      if (!steered.ok()) return drop_failed_batch(p0, steered.error());
      sampler_.probabilities(*steered, buffers_.history, history_len_, p);
      const float* q = q_rows != nullptr ? q_rows + static_cast<size_t>(accepted) * sample_vocab : nullptr;
      const int32_t kept = speculative_accept(p, q, sample_vocab, draft, sampler_.rng());
      if (kept != draft) {
        forced_next_ = kept;
        break;
      }
    } else {
      auto choice = sample_from(scratch_.logits, row_state(accepted));
      if (!choice.ok()) return drop_failed_batch(p0, choice.error());
      if (*choice != draft) break;
    }
    ++accepted;
  }
  TERN_RETURN_IF_ERROR(kv_->rollback_to(p0 + 1 + accepted));
  append_history(buffers_.verify_tokens, 1 + accepted);
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
  const int32_t* missing = buffers_.history + (history_len_ - behind);
  Error e = Error::Ok;
  if (behind + extra <= d.context_) {
    std::memcpy(d.buffers_.prompt, missing, behind * sizeof(int32_t));
    if (token != nullptr) d.buffers_.prompt[behind] = *token;
    e = d.prefill(d.buffers_.prompt, behind + extra);
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
      std::memcpy(buffers_.biased_logits, logits, vocab * sizeof(float));
      auto left = grammar_.mask_logits(grammar_.draft_state(i), buffers_.biased_logits);
      if (!left.ok() || *left == 0) {
        d.drop_after(position_);
        return i;
      }
      logits = buffers_.biased_logits;
    }
    int32_t x;
    if (sampling) {
      // q: the target's sampler transforms on the draft's logits (the same ones p gets).
      float* q = buffers_.draft_probs + static_cast<size_t>(i) * vocab;
      sampler_.probabilities(logits, nullptr, 0, q);
      x = draw_from(q, vocab, sampler_.rng());
    } else {
      x = sampler_.sample(logits, nullptr, 0);  // greedy: no penalties while drafting
    }
    buffers_.verify_tokens[1 + i] = x;
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
  TERN_CHECK_OR_RETURN(
      mine->kind() == theirs->kind() && mine->vocab_size() == theirs->vocab_size(), Error::InvalidArgument,
      "draft model: its tokenizer differs (%d tokens, kind %d; this model's has %d, kind %d)", theirs->vocab_size(),
      static_cast<int>(theirs->kind()), mine->vocab_size(), static_cast<int>(mine->kind()));
  TERN_CHECK_OR_RETURN(mine->bos_id() == theirs->bos_id() && mine->eos_id() == theirs->eos_id() &&
                           mine->eot_id() == theirs->eot_id() && mine->unk_id() == theirs->unk_id(),
                       Error::InvalidArgument, "draft model: its tokenizer's special tokens differ");
  for (int32_t id = 0; id < mine->vocab_size(); ++id) {
    const PieceView a = mine->piece(id), b = theirs->piece(id);
    TERN_CHECK_OR_RETURN(
        a.size == b.size && std::memcmp(a.data, b.data, a.size) == 0 && mine->is_control(id) == theirs->is_control(id),
        Error::InvalidArgument, "draft model: its tokenizer differs at token %d ('%.*s', here '%.*s')", id,
        static_cast<int>(b.size), b.data, static_cast<int>(a.size), a.data);
  }
  SamplerParams greedy;  // the draft's own sampler is not used: drafts come from this session's
  greedy.temperature = 0.0f;
  release();  // checked: now its slot may go to the new draft (the same model again)
  TERN_ASSIGN_OR_RETURN(Session * d, draft->create_session(greedy));
  if (d->sampler_.vocab() != sampler_.vocab()) {
    const uint32_t theirs_vocab = d->sampler_.vocab();
    draft->destroy_session(d);
    return fail(Error::InvalidArgument, "draft model: it samples %u tokens, this model %u", theirs_vocab,
                sampler_.vocab());
  }
  draft_ = d;
  return Error::Ok;
}

}  // namespace tern
