#include "runtime/session.h"

#include <cstring>

#include "runtime/model.h"

namespace tern {

Error Session::init(Model& model, const SamplerParams& sampler, ArenaAllocator& arena) {
  model_ = &model;
  const MemoryPlan& plan = model.plan();
  context_ = plan.context_tokens;
  TERN_ASSIGN_OR_RETURN(kv_, create_kv_cache(model.kv_type(), kv_shape_of(model.config()), context_, arena));
  size_t unused = 0;
  TERN_RETURN_IF_ERROR(carve_forward_scratch(model.config(), plan.batch_tokens, context_, &arena, &scratch_, &unused));
  TERN_ASSIGN_OR_RETURN(history_, arena.allocate_array<int32_t>(context_, ArenaPurpose::Scratch, 64));
  TERN_RETURN_IF_ERROR(validate(sampler));
  SamplerParams checked = sampler;
  TERN_RETURN_IF_ERROR(sampler_.init(model.config().vocab, arena));
  return sampler_.configure(checked);
}

Error Session::prefill(const int32_t* tokens, size_t count) {
  TERN_CHECK_OR_RETURN(tokens != nullptr || count == 0, Error::InvalidArgument, "prefill with null tokens");
  if (count == 0) return Error::Ok;
  if (count > context_ - position_) {
    return fail(Error::PromptTooLong, "%zu tokens do not fit: %u of the %u-token context are free", count,
                context_ - position_, context_);
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
    const Error e = forward(*model_, *kv_, scratch_, tokens + done, n, position_, last, abort_);
    if (e != Error::Ok) {
      // Positions already written stay valid; the failed batch is dropped.
      has_logits_ = false;
      return e;
    }
    std::memcpy(history_ + position_, tokens + done, n * sizeof(int32_t));
    position_ += n;
    done += n;
  }
  has_logits_ = true;
  return Error::Ok;
}

Error Session::decode(int32_t token) {
  if (position_ >= context_) {
    return fail(Error::ContextFull, "the %u-token context is full; reset the session", context_);
  }
  return prefill(&token, 1);
}

Result<int32_t> Session::sample() {
  if (!has_logits_) return fail(Error::InvalidState, "sample before any prefill or decode");
  return sampler_.sample(scratch_.logits, history_, position_);
}

void Session::reset() {
  position_ = 0;
  has_logits_ = false;
  sampler_.configure(sampler_.params());  // reseed: the same seed gives the same text again
}

}  // namespace tern
