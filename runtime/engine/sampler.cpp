#include "runtime/engine/sampler.h"

#include <algorithm>
#include <cmath>

namespace tern {

Error validate(const SamplerParams& p) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) {
    return fail(Error::InvalidArgument, "sampler temperature %g must be finite and >= 0", p.temperature);
  }
  if (p.top_k < 0) return fail(Error::InvalidArgument, "sampler top_k %d must be >= 0", p.top_k);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return fail(Error::InvalidArgument, "sampler top_p %g must be in (0, 1]", p.top_p);
  }
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
    return fail(Error::InvalidArgument, "sampler min_p %g must be in [0, 1]", p.min_p);
  }
  if (!(p.repeat_penalty > 0.0f) || !std::isfinite(p.repeat_penalty)) {
    return fail(Error::InvalidArgument, "sampler repeat_penalty %g must be finite and > 0", p.repeat_penalty);
  }
  if (p.repeat_last_n < 0) {
    return fail(Error::InvalidArgument, "sampler repeat_last_n %d must be >= 0", p.repeat_last_n);
  }
  if (!std::isfinite(p.presence_penalty) || !std::isfinite(p.frequency_penalty)) {
    return fail(Error::InvalidArgument, "sampler presence_penalty %g / frequency_penalty %g must be finite",
                p.presence_penalty, p.frequency_penalty);
  }
  return Error::Ok;
}

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

void Rng::seed_with(uint64_t seed) {
  uint64_t x = seed;
  for (auto& s : s_) s = splitmix64(x);
}

void Rng::get_state(uint64_t out[4]) const {
  for (int i = 0; i < 4; ++i) out[i] = s_[i];
}

void Rng::set_state(const uint64_t in[4]) {
  for (int i = 0; i < 4; ++i) s_[i] = in[i];
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

size_t Sampler::required_arena_bytes(uint32_t vocab) {
  return align_up(static_cast<size_t>(vocab) * sizeof(Candidate), 64) + 64 +
         align_up(static_cast<size_t>(vocab) * sizeof(int32_t), 64) + 64;
}

Error Sampler::init(uint32_t vocab, ArenaAllocator& arena) {
  TERN_CHECK_OR_RETURN(vocab > 0, Error::InvalidArgument, "sampler over an empty vocabulary");
  TERN_ASSIGN_OR_RETURN(candidates_, arena.allocate_array<Candidate>(vocab, ArenaPurpose::Sampler, 64));
  TERN_ASSIGN_OR_RETURN(counts_, arena.allocate_array<int32_t>(vocab, ArenaPurpose::Sampler, 64));
  for (uint32_t i = 0; i < vocab; ++i) counts_[i] = 0;
  vocab_ = vocab;
  return configure(params_);
}

Error Sampler::configure(const SamplerParams& params) {
  TERN_RETURN_IF_ERROR(validate(params));
  params_ = params;
  rng_.seed_with(params.seed);
  return Error::Ok;
}

void Sampler::load_candidates(const float* logits, const int32_t* history, size_t history_len) {
  const size_t n_vocab = vocab_;
  for (size_t i = 0; i < n_vocab; ++i) candidates_[i] = Candidate{logits[i], static_cast<int32_t>(i)};

  const bool penalize =
      params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
  if (penalize && params_.repeat_last_n > 0 && history != nullptr) {
    const size_t n = std::min(history_len, static_cast<size_t>(params_.repeat_last_n));
    const int32_t* recent = history + (history_len - n);
    for (size_t i = 0; i < n; ++i) {
      if (recent[i] >= 0 && static_cast<size_t>(recent[i]) < n_vocab) ++counts_[recent[i]];
    }
    // Each distinct token once (its count is cleared as it is applied, so counts_ is all
    // zeros again afterwards).
    for (size_t i = 0; i < n; ++i) {
      const int32_t id = recent[i];
      if (id < 0 || static_cast<size_t>(id) >= n_vocab || counts_[id] == 0) continue;
      float& l = candidates_[id].logit;
      if (params_.repeat_penalty != 1.0f) l = l > 0.0f ? l / params_.repeat_penalty : l * params_.repeat_penalty;
      l -= static_cast<float>(counts_[id]) * params_.frequency_penalty + params_.presence_penalty;
      counts_[id] = 0;
    }
  }
}

int32_t Sampler::argmax() const {
  size_t best = 0;
  for (size_t i = 1; i < vocab_; ++i) {
    if (candidates_[i].logit > candidates_[best].logit) best = i;  // ties: lowest id
  }
  return candidates_[best].id;
}

size_t Sampler::keep_survivors() {
  const size_t n_vocab = vocab_;
  auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  size_t n = n_vocab;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    n = static_cast<size_t>(params_.top_k);
    std::nth_element(candidates_, candidates_ + n - 1, candidates_ + n_vocab, by_logit);
  }
  std::sort(candidates_, candidates_ + n, by_logit);

  // Softmax over the survivors at the temperature; logit field now holds probabilities.
  const float inv_t = 1.0f / params_.temperature;
  const float max_logit = candidates_[0].logit;
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const float p = std::exp((candidates_[i].logit - max_logit) * inv_t);
    candidates_[i].logit = p;
    total += p;
  }
  for (size_t i = 0; i < n; ++i) candidates_[i].logit = static_cast<float>(candidates_[i].logit / total);

  if (params_.min_p > 0.0f) {
    const float floor_p = params_.min_p * candidates_[0].logit;
    size_t keep = 1;
    while (keep < n && candidates_[keep].logit >= floor_p) ++keep;
    n = keep;
  }
  if (params_.top_p < 1.0f) {
    float cumulative = 0.0f;
    size_t keep = 0;
    while (keep < n) {
      cumulative += candidates_[keep].logit;
      ++keep;
      if (cumulative >= params_.top_p) break;
    }
    n = keep;
  }
  return n;
}

int32_t Sampler::sample(const float* logits, const int32_t* history, size_t history_len) {
  load_candidates(logits, history, history_len);
  if (params_.temperature == 0.0f) return argmax();
  const size_t n = keep_survivors();
  float mass = 0.0f;
  for (size_t i = 0; i < n; ++i) mass += candidates_[i].logit;
  const float r = rng_.next_float() * mass;
  float acc = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    acc += candidates_[i].logit;
    if (r < acc) return candidates_[i].id;
  }
  // Rounding left r at the very top: the last candidate with any probability (banned and
  // grammar-masked tokens have none and are sorted last).
  size_t last = n - 1;
  while (last > 0 && !(candidates_[last].logit > 0.0f)) --last;
  return candidates_[last].id;
}

void Sampler::probabilities(const float* logits, const int32_t* history, size_t history_len, float* out) {
  load_candidates(logits, history, history_len);  // reads all of `logits` before `out` is written
  if (params_.temperature == 0.0f) {
    const int32_t best = argmax();
    for (size_t i = 0; i < vocab_; ++i) out[i] = 0.0f;
    out[best] = 1.0f;
    return;
  }
  const size_t n = keep_survivors();
  double mass = 0.0;
  for (size_t i = 0; i < n; ++i) mass += candidates_[i].logit;
  for (size_t i = 0; i < vocab_; ++i) out[i] = 0.0f;
  for (size_t i = 0; i < n; ++i) out[candidates_[i].id] = static_cast<float>(candidates_[i].logit / mass);
}

float Sampler::log_probabilities(const float* logits, const int32_t* history, size_t history_len, int32_t chosen,
                                 TokenLogprob* top, uint32_t top_n, uint32_t* n_top) {
  load_candidates(logits, history, history_len);
  if (top == nullptr) top_n = 0;
  top_n = std::min(top_n, kMaxTopLogprobs);
  // Most likely first: the higher logit, then the lower id. The heap keeps the least likely
  // of the best top_n at top[0]; logprob holds the penalized logit until the end.
  auto better = [](const TokenLogprob& a, const TokenLogprob& b) {
    return a.logprob > b.logprob || (a.logprob == b.logprob && a.token < b.token);
  };
  float max_logit = -INFINITY;
  uint32_t held = 0;
  for (size_t i = 0; i < vocab_; ++i) {
    const float l = candidates_[i].logit;
    if (!std::isfinite(l)) continue;  // banned or masked (-inf)
    max_logit = std::max(max_logit, l);
    if (top_n == 0) continue;
    const TokenLogprob entry{static_cast<int32_t>(i), l};
    if (held < top_n) {
      top[held++] = entry;
      std::push_heap(top, top + held, better);
    } else if (better(entry, top[0])) {
      std::pop_heap(top, top + held, better);
      top[held - 1] = entry;
      std::push_heap(top, top + held, better);
    }
  }
  if (n_top != nullptr) *n_top = held;
  if (max_logit == -INFINITY) return -INFINITY;  // nothing possible (every logit -inf)
  const float inv_t = params_.temperature == 0.0f ? 1.0f : 1.0f / params_.temperature;
  double total = 0.0;
  for (size_t i = 0; i < vocab_; ++i) total += std::exp((candidates_[i].logit - max_logit) * inv_t);
  const float log_total = static_cast<float>(std::log(total));
  auto log_probability = [&](float logit) { return (logit - max_logit) * inv_t - log_total; };
  std::sort_heap(top, top + held, better);
  for (uint32_t k = 0; k < held; ++k) top[k].logprob = log_probability(top[k].logprob);
  if (chosen < 0 || static_cast<size_t>(chosen) >= vocab_) return -INFINITY;
  const float l = candidates_[chosen].logit;
  return l == -INFINITY ? -INFINITY : log_probability(l);
}

namespace {

// One draw over n non-negative weights (weight(i), their sum need not be 1; zeros are never
// drawn): one RNG draw against the running sum. -1, drawing nothing, when every weight is 0.
template <typename Weight>
int32_t draw_by_weight(size_t n, Rng& rng, Weight weight) {
  double mass = 0.0;
  for (size_t i = 0; i < n; ++i) mass += weight(i);
  if (!(mass > 0.0)) return -1;
  const double r = rng.next_float() * mass;
  double acc = 0.0;
  size_t last = 0;
  for (size_t i = 0; i < n; ++i) {
    const double w = weight(i);
    if (w <= 0.0) continue;
    acc += w;
    last = i;
    if (r < acc) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(last);  // rounding left r at the very top
}

}  // namespace

int32_t draw_from(const float* probs, size_t n, Rng& rng) {
  const int32_t drawn = draw_by_weight(n, rng, [probs](size_t i) { return static_cast<double>(probs[i]); });
  return drawn < 0 ? 0 : drawn;
}

int32_t speculative_accept(const float* p, const float* q, size_t n, int32_t draft, Rng& rng) {
  const bool in_range = draft >= 0 && static_cast<size_t>(draft) < n;
  const float px = in_range ? p[draft] : 0.0f;
  const float qx = q == nullptr ? 1.0f : (in_range ? q[draft] : 0.0f);
  // u < p/q without the division: q(x) = 0 with p(x) > 0 (a draft q could not have drawn) keeps it.
  if (rng.next_float() * qx < px) return draft;
  // The residual max(0, p - q); with q one-hot it is p without the draft.
  auto residual = [&](size_t i) -> double {
    const float qi = q != nullptr ? q[i] : (static_cast<int32_t>(i) == draft ? 1.0f : 0.0f);
    return p[i] > qi ? static_cast<double>(p[i]) - qi : 0.0;
  };
  // A rejection has probability 1 - sum(min(p, q)), the residual's mass: it is > 0 whenever
  // we get here, but float sums may round it to 0 when p and q (nearly) agree; p itself is
  // then the residual.
  const int32_t drawn = draw_by_weight(n, rng, residual);
  return drawn >= 0 ? drawn : draw_from(p, n, rng);
}

}  // namespace tern
