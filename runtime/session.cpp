#include "runtime/session.h"

#include <cstring>

#include "platform/clock.h"
#include "runtime/kv/kv_cache_spec.h"
#include "runtime/model.h"
#include "runtime/tokenizer.h"

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
  return sampler_.sample(scratch_.logits, history_, history_len_);
}

void Session::reset() {
  position_ = 0;
  history_len_ = 0;
  needs_reset_ = false;
  kv_->reset();
  has_logits_ = false;
  clear_abort();
  (void)sampler_.configure(sampler_.params());  // reseed: the same seed gives the same text again
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
  auto encoded = tokenizer->encode(prompt, prompt_size, options.add_bos && position_ == 0, options.parse_special,
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
  st.prompt_tokens = static_cast<uint32_t>(prompt_tokens);
  const uint64_t t1 = monotonic_ns();
  st.prefill_seconds = seconds_between(t0, t1);

  TokenDecoder decoder(*tokenizer);
  StopStringFilter filter(options.stop_strings, options.stop_string_count);
  bool callback_stop = false;
  char piece[512];
  Error result = Error::Ok;
  st.stop_reason = StopReason::MaxTokens;
  for (uint32_t i = 0; i < options.max_new_tokens; ++i) {
    auto next = sample();
    if (!next.ok()) {
      result = next.error();
      break;
    }
    const int32_t token = *next;
    ++st.generated_tokens;
    if (tokenizer->is_end_of_generation(token) || token == model_->config().eos_id ||
        (model_->config().eot_id >= 0 && token == model_->config().eot_id)) {
      st.stop_reason = StopReason::EndOfGeneration;
      // Keep the end-of-turn token in the context: a chat's next turn follows it.
      if ((evicting_ || position_ < context_) && decode(token) == Error::Ok) ++st.decoded_tokens;
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
    if (!evicting_ && position_ >= context_) {
      st.stop_reason = StopReason::ContextFull;
      break;
    }
    result = decode(token);
    if (result != Error::Ok) break;
    ++st.decoded_tokens;
  }
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
