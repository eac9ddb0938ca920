// Picks the next token from logits: repetition, frequency and presence penalties, then
// greedy (temperature 0) or temperature -> top-k -> softmax -> min-p -> top-p -> a draw from
// a seeded RNG. Also the log-probabilities of that distribution (OpenAI's logprobs).
// All working memory comes from the arena at setup; sampling itself never allocates.
//
// Cost on a 128k vocabulary: no step sorts or exponentiates the whole vocabulary unless the
// distribution needs it. Top-k is one filtering pass that keeps a running k-th best; min-p is
// a logit threshold (max + temperature * ln min_p); top-p without top-k takes one vectorized
// softmax pass for its denominator, then finds the nucleus by thresholds on the stored
// weights and a weighted selection among the few tokens above them. With top-k <= 1024 the
// survivors are sorted and drawn exactly as a sort of the whole vocabulary would draw them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/error.h"
#include "runtime/base/arena.h"

namespace tern {

struct SamplerParams {
  float temperature = 0.8f;     // 0 = greedy
  int32_t top_k = 40;           // 0 = all tokens
  float top_p = 0.95f;          // 1 = off
  float min_p = 0.05f;          // 0 = off
  float repeat_penalty = 1.0f;  // 1 = off; >1 discourages tokens seen in the last repeat_last_n
  int32_t repeat_last_n = 64;
  uint64_t seed = 0x7465726eULL;
  float presence_penalty = 0.0f;   // subtracted once from every token seen in the last repeat_last_n
  float frequency_penalty = 0.0f;  // subtracted per occurrence there
};

// InvalidArgument with the offending field named.
Error validate(const SamplerParams& params);

// A bias added to one token's logit before sampling (-inf bans it). A session holds up to
// kMaxLogitBias of them (Session::set_logit_bias; the C API's tern_logit_bias has this layout).
struct LogitBias {
  int32_t token;
  float bias;
};
inline constexpr size_t kMaxLogitBias = 1024;

// A token and its log-probability (Sampler::log_probabilities). At most kMaxTopLogprobs
// alternatives per token, as OpenAI's top_logprobs.
struct TokenLogprob {
  int32_t token;
  float logprob;
};
inline constexpr uint32_t kMaxTopLogprobs = 20;

// xoshiro256**: small, fast, and the same sequence on every platform for a seed.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { seed_with(seed); }
  void seed_with(uint64_t seed);
  uint64_t next_u64();
  // Uniform in [0, 1).
  float next_float() { return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f); }
  // The whole state, for saving and restoring a session.
  void get_state(uint64_t out[4]) const;
  void set_state(const uint64_t in[4]);

 private:
  uint64_t s_[4];
};

class Sampler {
 public:
  static size_t required_arena_bytes(uint32_t vocab);
  Error init(uint32_t vocab, ArenaAllocator& arena);
  Error configure(const SamplerParams& params);  // validates, reseeds
  const SamplerParams& params() const { return params_; }
  Rng& rng() { return rng_; }
  const Rng& rng() const { return rng_; }

  // `logits` (vocab floats) are not modified. `history` are the tokens so far, oldest first
  // (the last repeat_last_n of them are penalized).
  int32_t sample(const float* logits, const int32_t* history, size_t history_len);
  // The distribution sample() draws from, as vocab() probabilities into `out` (which may be
  // `logits`): the same penalties, temperature, top-k, min-p and top-p, the survivors
  // renormalized and every other token 0; greedy gives 1 at the argmax. Uses no RNG draw.
  void probabilities(const float* logits, const int32_t* history, size_t history_len, float* out);
  // Log-probabilities under the distribution sample() draws from before its tail cuts (OpenAI's
  // definition): the same penalties, then the temperature (greedy: temperature 1), a softmax
  // over the whole vocabulary, no top-k, min-p or top-p. Returns `chosen`'s (-inf when its
  // logit is -inf or it is outside the vocabulary) and writes the min(top_n, kMaxTopLogprobs)
  // most likely tokens with a finite log-probability into `top` (may be null when top_n is 0),
  // most likely first, ties by the lower id; *n_top (may be null) gets how many. A max-shifted
  // log-sum-exp in float, summed in blocks of float lanes added in double: one pass over the
  // vocabulary for the maximum, one filtering pass for the top_n, one vectorized pass for the
  // sum. Uses no RNG draw and no memory beyond init's.
  float log_probabilities(const float* logits, const int32_t* history, size_t history_len, int32_t chosen,
                          TokenLogprob* top, uint32_t top_n, uint32_t* n_top);
  uint32_t vocab() const { return vocab_; }

 private:
  struct Candidate {
    float logit;  // the penalized logit; a survivor's weight once keep_survivors() returns
    int32_t id;
  };
  // The penalized logits: `logits` itself without penalties, else a copy in work_.
  const float* penalized(const float* logits, const int32_t* history, size_t history_len);
  // The k best finite logits of w, by logit then the lower id, into candidates_ in no order.
  size_t best_candidates(const float* w, size_t k);
  // temperature > 0: the survivors into candidates_[0, n) with their weights (of any scale)
  // in .logit; returns n. 0: every token survives, its weight in exps_ and their sum in
  // *whole_mass. -1: no token has a finite logit.
  ptrdiff_t keep_survivors(const float* w, double* whole_mass);
  size_t keep_sorted(size_t n);  // top-k <= kSortedTopK: sorted, as a full sort would
  size_t keep_list(size_t n);    // a longer top-k list, in no order
  ptrdiff_t keep_from_vocabulary(const float* w, float max, double* whole_mass);  // top-k off
  // The shortest prefix, by logit then the lower id, of candidates_[0, n) whose weights
  // (work_[i] for candidates_[i]) reach `target`, moved to the front in no order; all n when
  // none does.
  size_t nucleus(size_t n, double target);
  int32_t draw_whole(double mass);  // a draw from exps_ over the whole vocabulary
  uint32_t vocab_ = 0;
  Candidate* candidates_ = nullptr;
  int32_t* counts_ = nullptr;  // occurrences per id in the penalty window, zero between calls
  float* work_ = nullptr;      // the penalized logits, then the candidates' weights
  float* exps_ = nullptr;      // e^((logit - max) / temperature) per id, where a step needs them
  uint8_t weights_level_ = 0;  // sampler_passes::weights_level(), read at init
  SamplerParams params_;
  Rng rng_;
};

// A draw from `n` probabilities (their sum need not be exactly 1; zeros are never drawn).
int32_t draw_from(const float* probs, size_t n, Rng& rng);

// Speculative sampling's accept rule for one drafted token. `draft` was drawn from q; the
// target's distribution is p (n probabilities each, after the same sampler transforms).
// Returns `draft` with probability min(1, p[draft] / q[draft]); otherwise a token drawn from
// max(0, p - q) renormalized, which is never `draft`. Either way the returned token is
// distributed as p. q null: a deterministic draft (prompt lookup, q one-hot at `draft`), so
// it is kept with probability p[draft] and otherwise replaced by a draw from p without it.
int32_t speculative_accept(const float* p, const float* q, size_t n, int32_t draft, Rng& rng);

}  // namespace tern
