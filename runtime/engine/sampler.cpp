#include "runtime/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <utility>

#include "runtime/engine/sampler_passes.h"

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

namespace {

using namespace sampler_passes;

constexpr size_t kSortedTopK = 1024;  // up to this top-k the survivors are sorted
constexpr float kMinWeight = 1e-38f;  // below every nonzero weight_of()

inline bool by_logit(float la, int32_t ia, float lb, int32_t ib) { return la > lb || (la == lb && ia < ib); }

}  // namespace

size_t Sampler::required_arena_bytes(uint32_t vocab) {
  const size_t n = vocab;
  return align_up(n * sizeof(Candidate), 64) + 64 + 3 * (align_up(n * sizeof(float), 64) + 64);
}

Error Sampler::init(uint32_t vocab, ArenaAllocator& arena) {
  TERN_CHECK_OR_RETURN(vocab > 0, Error::InvalidArgument, "sampler over an empty vocabulary");
  TERN_ASSIGN_OR_RETURN(candidates_, arena.allocate_array<Candidate>(vocab, ArenaPurpose::Sampler, 64));
  TERN_ASSIGN_OR_RETURN(counts_, arena.allocate_array<int32_t>(vocab, ArenaPurpose::Sampler, 64));
  TERN_ASSIGN_OR_RETURN(work_, arena.allocate_array<float>(vocab, ArenaPurpose::Sampler, 64));
  TERN_ASSIGN_OR_RETURN(exps_, arena.allocate_array<float>(vocab, ArenaPurpose::Sampler, 64));
  for (uint32_t i = 0; i < vocab; ++i) counts_[i] = 0;
  vocab_ = vocab;
  weights_level_ = weights_level();
  return configure(params_);
}

Error Sampler::configure(const SamplerParams& params) {
  TERN_RETURN_IF_ERROR(validate(params));
  params_ = params;
  rng_.seed_with(params.seed);
  return Error::Ok;
}

const float* Sampler::penalized(const float* logits, const int32_t* history, size_t history_len) {
  const bool penalize =
      params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
  const size_t n = std::min(history_len, static_cast<size_t>(params_.repeat_last_n));
  if (!penalize || history == nullptr || n == 0) return logits;
  const size_t n_vocab = vocab_;
  std::memcpy(work_, logits, n_vocab * sizeof(float));
  const int32_t* recent = history + (history_len - n);
  for (size_t i = 0; i < n; ++i) {
    if (recent[i] >= 0 && static_cast<size_t>(recent[i]) < n_vocab) ++counts_[recent[i]];
  }
  // Each distinct token once (its count is cleared as it is applied, so counts_ is all zeros
  // again afterwards).
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = recent[i];
    if (id < 0 || static_cast<size_t>(id) >= n_vocab || counts_[id] == 0) continue;
    float& l = work_[id];
    if (params_.repeat_penalty != 1.0f) l = l > 0.0f ? l / params_.repeat_penalty : l * params_.repeat_penalty;
    l -= static_cast<float>(counts_[id]) * params_.frequency_penalty + params_.presence_penalty;
    counts_[id] = 0;
  }
  return work_;
}

size_t Sampler::best_candidates(const float* w, size_t k) {
  const size_t n_vocab = vocab_;
  Candidate* c = candidates_;
  auto better = [](const Candidate& a, const Candidate& b) { return by_logit(a.logit, a.id, b.logit, b.id); };
  // Logits go in while they beat tau; when the buffer fills, it keeps its k best and tau
  // becomes the k-th. A later logit equal to tau has a higher id, so it ranks below all k.
  const size_t cap = std::min(n_vocab, std::max<size_t>(4 * k, 1024));  // >= k + kLanes when < n_vocab
  float tau = -INFINITY;
  size_t n = 0;
  auto take = [&](size_t i) {
    const float v = w[i];
    if (v > tau && v < INFINITY) c[n++] = Candidate{v, static_cast<int32_t>(i)};
  };
  size_t i = 0;
  for (; i + kLanes <= n_vocab; i += kLanes) {
    uint32_t mask = mask_above<false>(w + i, tau);
    if (mask == 0) continue;
    if (n + kLanes > cap) {
      std::nth_element(c, c + k - 1, c + n, better);
      n = k;
      tau = c[k - 1].logit;
      mask = mask_above<false>(w + i, tau);
    }
    for_each_bit(mask, i, take);
  }
  for (; i < n_vocab; ++i) take(i);
  if (n > k) {
    std::nth_element(c, c + k - 1, c + n, better);
    n = k;
  }
  return n;
}

size_t Sampler::keep_sorted(size_t n) {
  auto by_logit_first = [](const Candidate& a, const Candidate& b) { return by_logit(a.logit, a.id, b.logit, b.id); };
  Candidate* c = candidates_;
  std::sort(c, c + n, by_logit_first);

  // Softmax over the survivors at the temperature; logit field now holds probabilities.
  const float inv_t = 1.0f / params_.temperature;
  const float max_logit = c[0].logit;
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const float p = std::exp((c[i].logit - max_logit) * inv_t);
    c[i].logit = p;
    total += p;
  }
  for (size_t i = 0; i < n; ++i) c[i].logit = static_cast<float>(c[i].logit / total);

  if (params_.min_p > 0.0f) {
    const float floor_p = params_.min_p * c[0].logit;
    size_t keep = 1;
    while (keep < n && c[keep].logit >= floor_p) ++keep;
    n = keep;
  }
  if (params_.top_p < 1.0f) {
    float cumulative = 0.0f;
    size_t keep = 0;
    while (keep < n) {
      cumulative += c[keep].logit;
      ++keep;
      if (cumulative >= params_.top_p) break;
    }
    n = keep;
  }
  return n;
}

size_t Sampler::nucleus(size_t n, double target) {
  Candidate* c = candidates_;
  float* weight = work_;
  auto better = [c](size_t a, size_t b) { return by_logit(c[a].logit, c[a].id, c[b].logit, c[b].id); };
  auto swap = [c, weight](size_t a, size_t b) {
    std::swap(c[a], c[b]);
    std::swap(weight[a], weight[b]);
  };
  // A quickselect on the cumulative weight: [0, lo) is in, [hi, n) out, and the cut lies in
  // [lo, hi), where `need` more weight is wanted.
  size_t lo = 0, hi = n;
  double need = target;
  while (hi - lo > 32) {
    const size_t mid = lo + (hi - lo) / 2, last = hi - 1;
    if (better(mid, lo)) swap(mid, lo);
    if (better(last, lo)) swap(last, lo);
    if (better(last, mid)) swap(last, mid);
    swap(mid, last);  // the median of three as the pivot, at the end
    size_t split = lo;
    double mass = 0.0;
    for (size_t i = lo; i < last; ++i) {
      if (better(i, last)) {
        mass += weight[i];
        swap(i, split++);
      }
    }
    swap(split, last);
    if (mass >= need) {
      hi = split;
    } else {
      mass += weight[split];
      if (mass >= need) return split + 1;
      need -= mass;
      lo = split + 1;
    }
  }
  // Insertion sort of the last few, then the running sum.
  for (size_t i = lo + 1; i < hi; ++i)
    for (size_t j = i; j > lo && better(j, j - 1); --j) swap(j, j - 1);
  double acc = 0.0;
  for (size_t i = lo; i < hi; ++i) {
    acc += weight[i];
    if (acc >= need) return i + 1;
  }
  return hi;
}

size_t Sampler::keep_list(size_t n) {
  Candidate* c = candidates_;
  float* weight = work_;  // free: the list holds its logits
  const float inv_t = 1.0f / params_.temperature;
  float max = -INFINITY;
  for (size_t i = 0; i < n; ++i) max = std::max(max, c[i].logit);
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    weight[i] = weight_of((c[i].logit - max) * inv_t);
    total += weight[i];
  }
  if (params_.min_p > 0.0f) {
    size_t keep = 0;
    for (size_t i = 0; i < n; ++i) {
      if (weight[i] >= params_.min_p) {
        c[keep] = c[i];
        weight[keep++] = weight[i];
      }
    }
    n = keep;
  }
  if (params_.top_p < 1.0f) n = nucleus(n, params_.top_p * total);
  for (size_t i = 0; i < n; ++i) c[i].logit = weight[i];
  return n;
}

ptrdiff_t Sampler::keep_from_vocabulary(const float* w, float max, double* whole_mass) {
  const size_t n_vocab = vocab_;
  const float t = params_.temperature;
  const float inv_t = 1.0f / t;
  Candidate* c = candidates_;
  if (params_.top_p >= 1.0f) {
    if (params_.min_p <= 0.0f) {
      *whole_mass = weights(weights_level_, w, n_vocab, max, inv_t, exps_);
      return 0;
    }
    // Min-p alone: a logit threshold a little below the exact test on the weight.
    float floor_logit = max + t * (std::log(params_.min_p) - 1e-3f) - std::fabs(max) * 1e-6f;
    if (!(floor_logit > -INFINITY)) floor_logit = -INFINITY;
    size_t n = 0;
    auto take = [&](size_t i) {
      if (!(w[i] >= floor_logit)) return;
      const float e = weight_of((w[i] - max) * inv_t);
      if (e >= params_.min_p) c[n++] = Candidate{e, static_cast<int32_t>(i)};
    };
    size_t i = 0;
    for (; i + kLanes <= n_vocab; i += kLanes) for_each_bit(mask_above<true>(w + i, floor_logit), i, take);
    for (; i < n_vocab; ++i) take(i);
    return static_cast<ptrdiff_t>(n);
  }

  // Top-p: the softmax's denominator, then a weight threshold whose tokens hold the nucleus,
  // then the nucleus among those tokens.
  const double total = weights(weights_level_, w, n_vocab, max, inv_t, exps_);
  const double target = params_.top_p * total;
  // The tokens under a weight theta weigh less than V theta: at theta = (1 - top_p) total / V
  // the tokens at or above it hold the target. Min-p's floor may stand higher (its tokens may
  // then weigh less than the target: all of them are kept).
  const float floor_theta = params_.min_p > 0.0f ? params_.min_p : kMinWeight;
  const float safe_theta = static_cast<float>((1.0 - params_.top_p) * total / static_cast<double>(n_vocab));
  Level lo{0.0f, std::max(floor_theta, safe_theta), total};  // mass: an upper bound until measured
  lo.x = std::log(lo.theta);
  Level hi{0.5f, 1.6487213f, 0.0};  // e^0.5: above the largest weight, 1
  // The tokens at or above theta into candidates_, up to `cap` of them (false when more).
  size_t n = 0;
  auto collect = [&](float theta, size_t cap) {
    n = 0;
    auto take = [&](size_t j) { c[n++] = Candidate{w[j], static_cast<int32_t>(j)}; };
    size_t i = 0;
    for (; i + kLanes <= n_vocab; i += kLanes) {
      const uint32_t mask = mask_above<true>(exps_ + i, theta);
      if (mask == 0) continue;
      if (n + kLanes > cap) return false;
      for_each_bit(mask, i, take);
    }
    for (; i < n_vocab; ++i) {
      if (exps_[i] >= theta) take(i);
    }
    return true;
  };
  // Their weights beside them in work_ (free: the candidates hold their logits), and the sum.
  float* weight = work_;
  auto gather = [&] {
    double mass = 0.0;
    for (size_t i = 0; i < n; ++i) {
      weight[i] = exps_[c[i].id];
      mass += weight[i];
    }
    return mass;
  };
  // A peaked distribution has few tokens above the bound. Otherwise narrow [lo, hi) by four
  // thresholds a pass until the tokens between lo and the cut, at most (mass(lo) - target) /
  // lo's threshold, are few.
  if (!collect(lo.theta, 4096)) {
    for (int pass = 0; pass < 3 && (lo.mass - target) / lo.theta > 2048.0 && hi.x - lo.x > 0.25f; ++pass) {
      Level levels[kLevels];
      for (size_t l = 0; l < kLevels; ++l) {
        levels[l].x = lo.x + (hi.x - lo.x) * static_cast<float>(l + 1) / static_cast<float>(kLevels + 1);
        levels[l].theta = std::exp(levels[l].x);
      }
      measure_levels(exps_, n_vocab, levels, kLevels);
      for (const Level& l : levels) {
        if (l.mass >= target) {
          lo = l;
        } else {
          hi = l;
          break;
        }
      }
    }
    collect(lo.theta, n_vocab);
  }
  // The level sums round differently from this one: should a level have seemed to hold the
  // target and not, the floor holds the nucleus (or is all there is).
  if (gather() < target && lo.theta != floor_theta) {
    collect(floor_theta, n_vocab);
    gather();
  }
  n = nucleus(n, target);
  for (size_t i = 0; i < n; ++i) c[i].logit = weight[i];
  return static_cast<ptrdiff_t>(n);
}

ptrdiff_t Sampler::keep_survivors(const float* w, double* whole_mass) {
  const size_t n_vocab = vocab_;
  const size_t k =
      params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n_vocab ? static_cast<size_t>(params_.top_k) : n_vocab;
  if (k <= kSortedTopK || k < n_vocab) {
    const size_t n = best_candidates(w, k);
    if (n == 0) return -1;
    return static_cast<ptrdiff_t>(k <= kSortedTopK ? keep_sorted(n) : keep_list(n));
  }
  const float max = max_finite(w, n_vocab);
  if (max == -INFINITY) return -1;
  return keep_from_vocabulary(w, max, whole_mass);
}

int32_t Sampler::draw_whole(double mass) {
  const size_t n_vocab = vocab_;
  const double r = rng_.next_float() * mass;
  double acc = 0.0;
  int32_t last = -1;  // the last token with any weight
  for (size_t b = 0; b < n_vocab; b += kBlock) {
    const size_t len = std::min(kBlock, n_vocab - b);
    const float s = block_sum(exps_ + b, len);
    if (!(s > 0.0f)) continue;
    if (acc + s > r) {
      for (size_t i = b; i < b + len; ++i) {
        if (!(exps_[i] > 0.0f)) continue;
        acc += exps_[i];
        last = static_cast<int32_t>(i);
        if (r < acc) return last;
      }
      return last;  // rounding: the block's sum said r is in it
    }
    acc += s;
    for (size_t i = b + len; i-- > b;) {
      if (exps_[i] > 0.0f) {
        last = static_cast<int32_t>(i);
        break;
      }
    }
  }
  return last < 0 ? 0 : last;
}

int32_t Sampler::sample(const float* logits, const int32_t* history, size_t history_len) {
  const float* w = penalized(logits, history, history_len);
  if (params_.temperature == 0.0f) return argmax(w, vocab_);
  double whole_mass = 0.0;
  const ptrdiff_t survivors = keep_survivors(w, &whole_mass);
  if (survivors < 0) return argmax(w, vocab_);
  if (survivors == 0) return draw_whole(whole_mass);
  const size_t n = static_cast<size_t>(survivors);
  float mass = 0.0f;
  for (size_t i = 0; i < n; ++i) mass += candidates_[i].logit;
  const float r = rng_.next_float() * mass;
  float acc = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    acc += candidates_[i].logit;
    if (r < acc) return candidates_[i].id;
  }
  // Rounding left r at the very top: the last candidate with any probability (banned and
  // grammar-masked tokens have none).
  size_t last = n - 1;
  while (last > 0 && !(candidates_[last].logit > 0.0f)) --last;
  return candidates_[last].id;
}

void Sampler::probabilities(const float* logits, const int32_t* history, size_t history_len, float* out) {
  // Every step reads all of `logits` (or its penalized copy) before `out` is written.
  const float* w = penalized(logits, history, history_len);
  const size_t n_vocab = vocab_;
  double whole_mass = 0.0;
  const ptrdiff_t survivors = params_.temperature == 0.0f ? -1 : keep_survivors(w, &whole_mass);
  if (survivors < 0) {
    const int32_t best = argmax(w, n_vocab);
    for (size_t i = 0; i < n_vocab; ++i) out[i] = 0.0f;
    out[best] = 1.0f;
    return;
  }
  if (survivors == 0) {
    const double inv_mass = 1.0 / whole_mass;
    for (size_t i = 0; i < n_vocab; ++i) out[i] = static_cast<float>(exps_[i] * inv_mass);
    return;
  }
  const size_t n = static_cast<size_t>(survivors);
  double mass = 0.0;
  for (size_t i = 0; i < n; ++i) mass += candidates_[i].logit;
  for (size_t i = 0; i < n_vocab; ++i) out[i] = 0.0f;
  for (size_t i = 0; i < n; ++i) out[candidates_[i].id] = static_cast<float>(candidates_[i].logit / mass);
}

float Sampler::log_probabilities(const float* logits, const int32_t* history, size_t history_len, int32_t chosen,
                                 TokenLogprob* top, uint32_t top_n, uint32_t* n_top) {
  const float* w = penalized(logits, history, history_len);
  const size_t n_vocab = vocab_;
  if (top == nullptr) top_n = 0;
  top_n = std::min(top_n, kMaxTopLogprobs);
  // Most likely first: the higher logit, then the lower id; -inf (banned, masked) never.
  size_t held = 0;
  if (top_n > 0) {
    held = best_candidates(w, top_n);
    std::sort(candidates_, candidates_ + held,
              [](const Candidate& a, const Candidate& b) { return by_logit(a.logit, a.id, b.logit, b.id); });
  }
  if (n_top != nullptr) *n_top = static_cast<uint32_t>(held);
  const float max_logit = max_finite(w, n_vocab);
  if (max_logit == -INFINITY) return -INFINITY;  // nothing possible (every logit -inf)
  const float inv_t = params_.temperature == 0.0f ? 1.0f : 1.0f / params_.temperature;
  const double total = weights(weights_level_, w, n_vocab, max_logit, inv_t, exps_);
  const float log_total = static_cast<float>(std::log(total));
  auto log_probability = [&](float logit) { return (logit - max_logit) * inv_t - log_total; };
  for (size_t k = 0; k < held; ++k) top[k] = TokenLogprob{candidates_[k].id, log_probability(candidates_[k].logit)};
  if (chosen < 0 || static_cast<size_t>(chosen) >= n_vocab) return -INFINITY;
  const float l = w[chosen];
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
