// A whole prompt at a time: tokenized into the session's buffer, and run after the part of it
// the session already holds (prefix reuse).
#include "runtime/engine/model.h"
#include "runtime/engine/session.h"

namespace tern {

Result<size_t> Session::encode_prompt(const char* text, size_t size, bool add_bos, bool parse_special) {
  TERN_CHECK_OR_RETURN(buffers_.prompt != nullptr, Error::InvalidState, "the session has no prompt buffer");
  // Without eviction the reply needs one free position after the prompt.
  const size_t capacity = evicting_ ? context_ : context_ - 1;
  size_t needed = 0;
  auto encoded = model_->encode(text, size, add_bos, parse_special, buffers_.prompt, capacity, &needed);
  if (!encoded.ok() && encoded.error() == Error::OutOfRange) {
    return fail(Error::PromptTooLong, "the prompt is %zu tokens; the %u-token context holds %zu and the reply", needed,
                context_, capacity);
  }
  return encoded;
}

Result<uint32_t> Session::prefill_reusing(const int32_t* tokens, size_t count) {
  TERN_CHECK_OR_RETURN(tokens != nullptr && count > 0, Error::InvalidArgument, "an empty prompt: nothing to run");
  TERN_CHECK_OR_RETURN(count <= context_, Error::PromptTooLong, "the prompt is %zu tokens; the context holds %u", count,
                       context_);
  // The history covers positions [position_ - history_len_, position_): a prefix can only be
  // compared where it reaches back to position 0.
  uint32_t keep = 0;
  if (!needs_reset_ && position_ > 0 && history_len_ == position_) {
    const int32_t* held = buffers_.history;
    while (keep < position_ && keep < count && held[keep] == tokens[keep]) ++keep;
  }
  if (keep == count) --keep;  // the last token runs again, for fresh logits
  const bool exact = keep == position_ || (keep > 0 && kv_->rollback_is_exact(keep - 1));
  if (keep > 0 && exact) {
    TERN_RETURN_IF_ERROR(truncate(keep));
  } else {
    keep = 0;  // rolling back would run the kept tokens again anyway
    reset();
  }
  TERN_RETURN_IF_ERROR(prefill(tokens + keep, count - keep));
  return keep;
}

}  // namespace tern
