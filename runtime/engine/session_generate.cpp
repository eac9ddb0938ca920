// Session::generate: a prompt tokenized and prefilled, then tokens sampled (or accepted from
// drafts), decoded and streamed as text until a stop condition.
#include "runtime/engine/session.h"

#include <cmath>

#include "platform/clock.h"
#include "runtime/engine/model.h"
#include "runtime/engine/stop_strings.h"
#include "runtime/text/tokenizer.h"

namespace tern {

Result<size_t> Session::prefill_prompt(const char* prompt, size_t prompt_size, const GenerateOptions& options) {
  const uint32_t free_positions = evicting_ ? context_ : context_ - position_;
  size_t needed = 0;
  auto encoded = model_->encode(prompt, prompt_size, options.add_bos && position_ == 0, options.parse_special,
                                buffers_.prompt, free_positions, &needed);
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
  TERN_RETURN_IF_ERROR(prefill(buffers_.prompt, prompt_tokens));
  // A draft model runs the prompt now, with the target's (counted as prefill time).
  if (draft_ != nullptr && drafting() && !options.wants_logprobs()) (void)draft_catch_up(nullptr);
  return prompt_tokens;
}

Result<int32_t> Session::next_generated_token(bool* predecoded, uint32_t* decoded_ahead, TokenLogprobs* logprobs) {
  *predecoded = pending_count_ > 0;
  if (*predecoded) {
    const int32_t token = buffers_.verify_tokens[1 + pending_next_++];
    --pending_count_;
    *decoded_ahead = pending_count_ + 1;
    return token;
  }
  if (forced_next_ >= 0) {  // a rejected draft's replacement, drawn by verification
    const int32_t token = forced_next_;
    forced_next_ = -1;
    return token;
  }
  if (grammar_.finished() && model_->grammar_vocab().end_token_count() == 0) return -1;
  return sample(logprobs);
}

bool Session::ends_generation(int32_t token) const {
  const ModelConfig& c = model_->config();
  return model_->tokenizer()->is_end_of_generation(token) || token == c.eos_id || (c.eot_id >= 0 && token == c.eot_id);
}

Error Session::generate(const char* prompt, size_t prompt_size, const GenerateOptions& options, PieceCallback on_piece,
                        void* user_data, GenerateStats* stats) {
  GenerateStats local;
  GenerateStats& st = stats != nullptr ? *stats : local;
  st = GenerateStats{};
  Tokenizer* tokenizer = model_->tokenizer();
  TERN_CHECK_OR_RETURN(tokenizer != nullptr, Error::InvalidState, "the model has no tokenizer (not from a bundle)");
  TERN_CHECK_OR_RETURN(prompt != nullptr || prompt_size == 0, Error::InvalidArgument, "null prompt");
  TERN_RETURN_IF_ERROR(check_stop_strings(options.stop_strings, options.stop_string_count));
  TERN_CHECK_OR_RETURN(!options.wants_logprobs() || options.logprobs_top <= kMaxTopLogprobs, Error::InvalidArgument,
                       "%u top logprobs (at most %u)", options.logprobs_top, kMaxTopLogprobs);

  const uint64_t t0 = monotonic_ns();
  TERN_ASSIGN_OR_RETURN(const size_t prompt_tokens, prefill_prompt(prompt, prompt_size, options));
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
  const bool speculative = drafting() && !options.wants_logprobs();
  TokenLogprobs logprobs;
  logprobs.top_n = options.wants_logprobs() ? options.logprobs_top : 0;
  // With drafting, accepted drafts are already in the cache when they are emitted; where
  // token-by-token decoding would not have run them (a stop), they are rolled back after.
  uint32_t decoded_ahead = 0;
  for (uint32_t i = 0; i < options.max_new_tokens; ++i) {
    bool predecoded = false;
    auto next = next_generated_token(&predecoded, &decoded_ahead, options.wants_logprobs() ? &logprobs : nullptr);
    if (!next.ok()) {
      result = next.error();
      break;
    }
    if (*next < 0) {
      st.stop_reason = StopReason::EndOfGeneration;  // the grammar is complete, and no end token says so
      break;
    }
    const int32_t token = *next;
    ++st.generated_tokens;
    if (ends_generation(token)) {
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
    if (options.on_token != nullptr) {
      const bool with = options.wants_logprobs();
      options.on_token(token, with ? logprobs.logprob : NAN, logprobs.top, with ? logprobs.n_top : 0,
                       options.token_user);
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
