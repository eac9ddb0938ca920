#include "runtime/engine/memory_plan.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "runtime/engine/session_layout.h"

namespace tern {

size_t session_arena_bytes(const ModelConfig& config, uint32_t batch, uint32_t context, const KvCacheSpec& kv,
                           size_t* scratch_bytes, size_t* sampler_bytes, size_t* kv_bytes, uint32_t draft_tokens,
                           size_t grammar_bytes) {
  SessionShape shape;
  shape.config = &config;
  shape.kv = &kv;
  shape.context = context;
  shape.batch = batch;
  shape.draft_tokens = draft_tokens;
  shape.grammar_bytes = grammar_bytes;
  shape.sample_vocab = config.vocab;
  const SessionBytes b = session_bytes(shape);
  if (scratch_bytes != nullptr) *scratch_bytes = b.scratch;
  if (sampler_bytes != nullptr) *sampler_bytes = b.sampler;
  if (kv_bytes != nullptr) *kv_bytes = b.kv;
  return b.total();
}

size_t session_table_bytes(uint32_t sessions) {
  return align_up(static_cast<size_t>(sessions) * kSessionSlotBytes, 64) + 64;
}

namespace {

struct Totals {
  size_t scratch, sampler, kv, session, arena, total;
};

Totals totals_for(const MemoryPlanRequest& r, uint32_t context) {
  Totals t{};
  const uint32_t batch = r.batch_tokens < context ? r.batch_tokens : context;
  t.session = align_up(session_arena_bytes(r.config, batch, context, *r.kv, &t.scratch, &t.sampler, &t.kv,
                                           r.draft_tokens, r.grammar_bytes),
                       64) +
              64;
  const uint32_t sessions = r.sessions == 0 ? 1 : r.sessions;
  t.arena = r.arena_weight_bytes + r.tokenizer_bytes + session_table_bytes(sessions) + sessions * t.session;
  t.total = kProcessOverheadBytes + r.resident_weight_bytes + r.anonymous_weight_bytes + t.arena;
  return t;
}

}  // namespace

uint32_t sessions_that_fit(const MemoryPlan& plan, uint64_t budget) {
  const size_t fixed = plan.overhead_bytes + plan.resident_weight_bytes + plan.anonymous_weight_bytes +
                       plan.arena_weight_bytes + plan.tokenizer_bytes;
  if (plan.session_bytes == 0 || budget <= fixed) return 0;
  // The slot table grows with the count: step down from the estimate until it fits.
  uint64_t n = (budget - fixed) / plan.session_bytes;
  if (n > UINT32_MAX) n = UINT32_MAX;
  while (n > 0 && fixed + session_table_bytes(static_cast<uint32_t>(n)) + n * plan.session_bytes > budget) --n;
  return static_cast<uint32_t>(n);
}

Result<MemoryPlan> plan_memory(const MemoryPlanRequest& r) {
  const ModelConfig& c = r.config;
  TERN_CHECK_OR_RETURN(c.hidden > 0 && c.layers > 0 && c.heads > 0 && c.kv_heads > 0 && c.head_dim > 0 && c.vocab > 0 &&
                           c.ffn_hidden > 0,
                       Error::InvalidArgument, "model config has a zero dimension");
  TERN_CHECK_OR_RETURN(r.batch_tokens > 0, Error::InvalidArgument, "prefill batch of 0 tokens");
  // A verification step runs the drafts and the token before them as one batch.
  TERN_CHECK_OR_RETURN(r.draft_tokens <= kMaxDraftTokens && r.draft_tokens < r.batch_tokens, Error::InvalidArgument,
                       "%u draft tokens: at most %u, and fewer than the %u-token prefill batch", r.draft_tokens,
                       kMaxDraftTokens, r.batch_tokens);
  TERN_CHECK_OR_RETURN(r.kv != nullptr, Error::InvalidArgument, "memory plan without a KV cache spec");
  const uint32_t model_context = c.max_context > 0 ? c.max_context : 2048;
  // Capacities the cache can have, ascending: the plan picks the largest that fits.
  TERN_ASSIGN_OR_RETURN(const KvCapacityLadder ladder,
                        kv_capacity_ladder(*r.kv, r.min_context, model_context, r.context_request));
  const uint32_t min_context = ladder.at(0);
  const uint32_t steps = ladder.steps;
  auto context_at = [&](uint32_t i) { return ladder.at(i); };

  const Totals at_min = totals_for(r, min_context);
  if (r.budget_bytes > 0 && r.budget_bytes < at_min.total) {
    return fail(Error::BudgetTooSmall,
                "memory budget %llu bytes is too small: at least %zu bytes (%.1f MiB) are needed for %u session%s of a "
                "%u-token context (weights %zu%s, arena %zu, process overhead %zu)",
                static_cast<unsigned long long>(r.budget_bytes), at_min.total,
                static_cast<double>(at_min.total) / (1024.0 * 1024.0), r.sessions == 0 ? 1 : r.sessions,
                r.sessions > 1 ? "s" : "", min_context, r.resident_weight_bytes + r.anonymous_weight_bytes,
                r.anonymous_weight_bytes > 0 ? " copied into anonymous memory" : "", at_min.arena,
                kProcessOverheadBytes);
  }
  // The largest context that fits; totals grow with the context, so bisect.
  uint32_t lo = 0, hi = steps;
  if (r.budget_bytes == 0) {
    lo = hi;
  } else {
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo + 1) / 2;
      if (totals_for(r, context_at(mid)).total <= r.budget_bytes) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
  }
  if (r.context_exact && r.context_request > 0 && lo < steps) {  // an explicit context is a contract
    const uint32_t asked = context_at(steps);
    const size_t needed = totals_for(r, asked).total;
    return fail(Error::BudgetTooSmall,
                "memory budget %llu bytes is too small for the %u-token context asked for: it needs %zu bytes (%.1f "
                "MiB) for %u session%s; the budget holds %u tokens (ask for no context to get the most that fits)",
                static_cast<unsigned long long>(r.budget_bytes), asked, needed,
                static_cast<double>(needed) / (1024.0 * 1024.0), r.sessions == 0 ? 1 : r.sessions,
                r.sessions > 1 ? "s" : "", context_at(lo));
  }
  lo = context_at(lo);
  const Totals t = totals_for(r, lo);
  MemoryPlan plan;
  plan.overhead_bytes = kProcessOverheadBytes;
  plan.resident_weight_bytes = r.resident_weight_bytes;
  plan.anonymous_weight_bytes = r.anonymous_weight_bytes;
  plan.arena_weight_bytes = r.arena_weight_bytes;
  plan.tokenizer_bytes = r.tokenizer_bytes;
  plan.scratch_bytes = t.scratch;
  plan.sampler_bytes = t.sampler;
  plan.kv_bytes = t.kv;
  plan.session_bytes = t.session;
  plan.sessions = r.sessions == 0 ? 1 : r.sessions;
  plan.arena_bytes = t.arena;
  plan.total_bytes = t.total;
  plan.minimum_budget_bytes = at_min.total;
  plan.context_tokens = lo;
  plan.batch_tokens = r.batch_tokens < lo ? r.batch_tokens : lo;
  plan.draft_tokens = r.draft_tokens;
  plan.grammar_bytes = r.grammar_bytes;
  plan.kv_compressed = r.kv->compressed;
  plan.kv_evicting = r.kv->evicting();
  plan.kv_bytes_per_token = kv_cache_bytes_per_token(*r.kv);
  std::snprintf(plan.kv_mode, sizeof plan.kv_mode, "%s", r.kv->name);
  return plan;
}

Result<MemoryPlan> plan_memory_auto(const MemoryPlanRequest& base, const KvModeRequest& kv,
                                    const schema::KvProfile* calibrated, KvHeadBits* bits, KvCacheSpec* spec) {
  TERN_CHECK_OR_RETURN(bits != nullptr && spec != nullptr, Error::InvalidArgument, "auto KV mode: null output");
  KvAutoCandidate candidates[kKvAutoMaxCandidates];
  const size_t n = kv_auto_candidates(calibrated, kv_shape_of(base.config), bits, candidates);
  uint32_t got[kKvAutoMaxCandidates] = {};
  double bytes_per_token[kKvAutoMaxCandidates] = {};
  size_t best = n;
  auto better = [&](size_t i, size_t j) {  // is candidate i preferred to j?
    if (!candidates[i].estimated) return bytes_per_token[i] > bytes_per_token[j];
    if (candidates[i].estimated_kl != candidates[j].estimated_kl)
      return candidates[i].estimated_kl < candidates[j].estimated_kl;
    return bytes_per_token[i] < bytes_per_token[j];
  };
  uint32_t wanted = 0;
  for (size_t i = 0; i < n; ++i) {
    KvModeRequest r = kv;
    r.mode = candidates[i].name;
    KvCacheSpec s;
    if (make_kv_cache_spec(r, base.config, calibrated, bits, &s) != Error::Ok) continue;
    MemoryPlanRequest req = base;
    req.kv = &s;
    req.budget_bytes = 0;
    auto unlimited = plan_memory(req);
    if (!unlimited.ok()) continue;
    wanted = std::max(wanted, unlimited->context_tokens);
    bytes_per_token[i] = unlimited->kv_bytes_per_token;
    req.budget_bytes = base.budget_bytes;
    uint32_t fitted = unlimited->context_tokens;
    if (base.budget_bytes > 0) {
      auto within = plan_memory(req);
      if (!within.ok()) continue;
      fitted = within->context_tokens;
    }
    got[i] = fitted;
    if (fitted < unlimited->context_tokens) continue;
    if (best == n || better(i, best)) best = i;
  }
  if (best == n) {
    char fits[512];
    size_t used = 0;
    fits[0] = '\0';
    for (size_t i = 0; i < n && used + 1 < sizeof fits; ++i) {
      const int w =
          std::snprintf(fits + used, sizeof fits - used, "%s%s %u", used ? ", " : "", candidates[i].name, got[i]);
      if (w > 0) used += std::min(static_cast<size_t>(w), sizeof fits - used - 1);
    }
    return fail(Error::BudgetTooSmall, "KV mode auto: no mode holds %u tokens in %llu bytes; the context each gets: %s",
                wanted, static_cast<unsigned long long>(base.budget_bytes), fits);
  }
  KvModeRequest r = kv;
  r.mode = candidates[best].name;
  TERN_RETURN_IF_ERROR(make_kv_cache_spec(r, base.config, calibrated, bits, spec));
  MemoryPlanRequest req = base;
  req.kv = spec;
  return plan_memory(req);
}

uint32_t default_context_request(const ModelConfig& config, uint64_t budget_bytes, uint32_t context_request) {
  if (context_request > 0 || budget_bytes > 0) return context_request;
  const uint32_t cap = config.embedding ? kDefaultEmbeddingContextTokens : kDefaultContextTokens;
  return config.max_context > 0 && config.max_context < cap ? config.max_context : cap;
}

size_t auto_grammar_bytes(uint32_t vocab_tokens) {
  if (vocab_tokens == 0) return 0;
  constexpr size_t kStep = size_t{64} << 10;
  const size_t bytes = (size_t{2} << 20) + size_t{48} * vocab_tokens;
  return (bytes + kStep - 1) / kStep * kStep;
}

Result<uint64_t> parse_byte_size(const char* text) {
  TERN_CHECK_OR_RETURN(text != nullptr && *text != '\0', Error::InvalidArgument, "empty byte size");
  // Digits, an optional .digits, a unit: nothing strtod would also take (a sign, hex, an
  // exponent, "inf", spaces), and no fraction of a byte ("0.5" was 0 bytes: no limit at all).
  const char* p = text;
  uint64_t whole = 0, frac = 0, scale = 1;
  for (; *p >= '0' && *p <= '9'; ++p) {
    TERN_CHECK_OR_RETURN(!__builtin_mul_overflow(whole, 10, &whole) && !__builtin_add_overflow(whole, *p - '0', &whole),
                         Error::OutOfRange, "'%s' is too large", text);
  }
  TERN_CHECK_OR_RETURN(p != text, Error::InvalidArgument,
                       "'%s' is not a byte size (whole bytes, or with a unit: 4096, 512K, 64M, 1.5G)", text);
  if (*p == '.') {  // at most six digits: frac * 2^40 stays inside 64 bits
    for (++p; *p >= '0' && *p <= '9' && scale < 1000000; ++p) {
      frac = frac * 10 + static_cast<unsigned>(*p - '0');
      scale *= 10;
    }
    TERN_CHECK_OR_RETURN(scale > 1 && !(*p >= '0' && *p <= '9'), Error::InvalidArgument,
                         "'%s' is not a byte size (whole bytes, or with a unit: 4096, 512K, 64M, 1.5G)", text);
  }
  uint64_t multiplier = 1;
  switch (*p) {
    case '\0': break;
    case 'k':
    case 'K': multiplier = uint64_t{1} << 10, ++p; break;
    case 'm':
    case 'M': multiplier = uint64_t{1} << 20, ++p; break;
    case 'g':
    case 'G': multiplier = uint64_t{1} << 30, ++p; break;
    case 't':
    case 'T': multiplier = uint64_t{1} << 40, ++p; break;
    default: return fail(Error::InvalidArgument, "'%s': unknown size suffix (use K, M, G or T)", text);
  }
  if (multiplier > 1 && (*p == 'i' || *p == 'I')) ++p;
  if (*p == 'b' || *p == 'B') ++p;
  TERN_CHECK_OR_RETURN(*p == '\0', Error::InvalidArgument,
                       "'%s' is not a byte size (whole bytes, or with a unit: 4096, 512K, 64M, 1.5G)", text);
  TERN_CHECK_OR_RETURN(frac * multiplier % scale == 0, Error::InvalidArgument, "'%s' is not a whole number of bytes",
                       text);
  uint64_t bytes = 0;
  TERN_CHECK_OR_RETURN(!__builtin_mul_overflow(whole, multiplier, &bytes) &&
                           !__builtin_add_overflow(bytes, frac * multiplier / scale, &bytes),
                       Error::OutOfRange, "'%s' is too large", text);
  return bytes;
}

}  // namespace tern
