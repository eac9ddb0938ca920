// One conversation with a model: the KV cache, forward scratch, sampler and token
// history, all inside the model's arena. Prefill and decode never allocate.
// Not thread-safe: one thread drives a session at a time.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "platform/error.h"
#include "runtime/forward.h"
#include "runtime/kv_cache.h"
#include "runtime/sampler.h"

namespace tern {

class Model;

class Session {
 public:
  // Runs the tokens after the current position, in batches. PromptTooLong (nothing run)
  // when they do not fit in the context; the prompt is never truncated silently.
  Error prefill(const int32_t* tokens, size_t count);
  // One token (the decode GEMV path). ContextFull when the context is used up.
  Error decode(int32_t token);
  // Logits after the last prefill/decode (vocab floats); null before any.
  const float* logits() const { return has_logits_ ? scratch_.logits : nullptr; }
  // Draws the next token from logits() with the sampler (history feeds repetition penalty).
  Result<int32_t> sample();
  Error set_sampler(const SamplerParams& params) { return sampler_.configure(params); }
  const SamplerParams& sampler_params() const { return sampler_.params(); }

  // Forgets the conversation (the memory stays).
  void reset();
  uint32_t position() const { return position_; }
  uint32_t context_tokens() const { return context_; }
  const int32_t* history() const { return history_; }

  // While *flag is nonzero, prefill/decode stop with Aborted (checked per layer).
  void set_abort_flag(const std::atomic<int>* flag) { abort_ = flag; }

  Model& model() const { return *model_; }
  const KvCache& kv_cache() const { return *kv_; }

 private:
  friend class Model;
  Session() = default;
  Error init(Model& model, const SamplerParams& sampler, ArenaAllocator& arena);

  Model* model_ = nullptr;
  KvCache* kv_ = nullptr;
  ForwardScratch scratch_;
  Sampler sampler_;
  int32_t* history_ = nullptr;  // tokens at positions [0, position_)
  uint32_t context_ = 0;
  uint32_t position_ = 0;
  bool has_logits_ = false;
  const std::atomic<int>* abort_ = nullptr;
};

}  // namespace tern
