#include "runtime/kv/kv_cache_spec.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/kv_quant.h"
#include "runtime/base/hash.h"
#include "runtime/kv/compressed_kv_cache.h"
#include "runtime/kv/kv_profile.h"
#include "schema/bundle_generated.h"

namespace tern {

Error parse_kv_aging(const char* suffix, uint8_t* aged_bits, uint32_t* aged_after_tokens, uint8_t* aged_after_percent) {
  TERN_CHECK_OR_RETURN(suffix != nullptr && suffix[0] == '>', Error::InvalidArgument, "KV aging: '>A@N' expected");
  char* end = nullptr;
  const long bits = std::strtol(suffix + 1, &end, 10);
  const bool bits_ok = end != suffix + 1 && kv_bits_supported(static_cast<uint32_t>(bits)) && *end == '@';
  long long tokens = 0;
  if (bits_ok) {
    const char* n = end + 1;
    tokens = (*n >= '0' && *n <= '9') ? std::strtoll(n, &end, 10) : -1;
  }
  const bool percent = bits_ok && *end == '%';
  if (percent) ++end;
  TERN_CHECK_OR_RETURN(bits_ok && tokens > 0 && tokens <= (percent ? 100 : 0x7fffffff) && *end == '\0',
                       Error::InvalidArgument,
                       "KV aging '%s': >A@N or >A@P%% with A in 2, 3, 4, 8 (bits of aged blocks), N > 0 tokens past "
                       "the exact window or 1 <= P <= 100 %% of the middle blocks kept at full width, e.g. q4>2@96, "
                       "q3>2@50%%",
                       suffix);
  *aged_bits = static_cast<uint8_t>(bits);
  *aged_after_tokens = percent ? 0 : static_cast<uint32_t>(tokens);
  *aged_after_percent = percent ? static_cast<uint8_t>(tokens) : 0;
  return Error::Ok;
}

Error parse_kv_heavy_hitter(const char* suffix, bool* equal_shares, uint8_t* recent_percent) {
  const char* s = suffix != nullptr ? suffix : "";
  const bool equal = std::strncmp(s, "/hh=equal", 9) == 0;
  const char* rest = equal ? s + 9 : (std::strncmp(s, "/hh", 3) == 0 ? s + 3 : nullptr);
  long percent = 90;
  bool ok = rest != nullptr;
  if (ok && *rest == '@') {
    char* end = nullptr;
    percent = (rest[1] >= '0' && rest[1] <= '9') ? std::strtol(rest + 1, &end, 10) : -1;
    ok = percent >= 0 && percent <= 100 && end != nullptr && end[0] == '%' && end[1] == '\0';
  } else if (ok) {
    ok = *rest == '\0';
  }
  TERN_CHECK_OR_RETURN(ok, Error::InvalidArgument,
                       "KV eviction '%s': /hh (per-head budgets from calibration) or /hh=equal, optionally @R%% (the "
                       "newest R %% of each head's blocks never dropped, 0..100, default 90), e.g. q4/hh, q4/hh@50%%",
                       s);
  *equal_shares = equal;
  *recent_percent = static_cast<uint8_t>(percent);
  return Error::Ok;
}

Error parse_kv_mode(const char* full_name, KvModeName* out) {
  TERN_CHECK_OR_RETURN(full_name != nullptr && out != nullptr, Error::InvalidArgument, "KV mode: null argument");
  KvModeName spec;
  // "base>A@N" or "base/hh": parse the base name, then the suffix.
  char base[64];
  const char* name = full_name;
  const char* aging = std::strchr(full_name, '>');
  const char* hh = std::strchr(full_name, '/');
  TERN_CHECK_OR_RETURN(aging == nullptr || hh == nullptr, Error::InvalidArgument,
                       "KV mode '%s': heavy-hitter eviction (/hh) does not combine with aging tiers (>A@N)", full_name);
  if (hh != nullptr) {
    TERN_RETURN_IF_ERROR(parse_kv_heavy_hitter(hh, &spec.equal_shares, &spec.hh_recent_percent));
    spec.heavy_hitter = true;
  }
  if (const char* suffix = hh != nullptr ? hh : aging; suffix != nullptr) {
    const size_t n = static_cast<size_t>(suffix - full_name);
    TERN_CHECK_OR_RETURN(n < sizeof base, Error::InvalidArgument, "KV mode '%s': name too long", full_name);
    std::memcpy(base, full_name, n);
    base[n] = '\0';
    name = base;
  }
  if (aging != nullptr)
    TERN_RETURN_IF_ERROR(parse_kv_aging(aging, &spec.aged_bits, &spec.aged_after_tokens, &spec.aged_after_percent));
  auto width = [](const char* s, char** end) -> uint8_t {
    const long v = std::strtol(s, end, 10);
    return (*end != s && kv_bits_supported(static_cast<uint32_t>(v))) ? static_cast<uint8_t>(v) : 0;
  };
  char* end = nullptr;
  if (std::strcmp(name, "fp16") == 0 || std::strcmp(name, "f16") == 0) {
    spec.kind = KvModeName::Kind::Exact;
    spec.exact_type = KvType::F16;
  } else if (std::strcmp(name, "f32") == 0 || std::strcmp(name, "fp32") == 0) {
    spec.kind = KvModeName::Kind::Exact;
    spec.exact_type = KvType::F32;
  } else if (name[0] == 'q') {
    const uint8_t b = width(name + 1, &end);
    TERN_CHECK_OR_RETURN(b != 0 && *end == '\0', Error::InvalidArgument, "KV mode '%s': q2, q3, q4 or q8", name);
    spec.kind = KvModeName::Kind::Uniform;
    spec.bits = KvHeadBits{b, b};
  } else if (name[0] == 'k') {
    const uint8_t kb = width(name + 1, &end);
    uint8_t vb = 0;
    if (kb != 0 && *end == 'v') vb = width(end + 1, &end);
    TERN_CHECK_OR_RETURN(kb != 0 && vb != 0 && *end == '\0', Error::InvalidArgument,
                         "KV mode '%s': k<bits>v<bits>, e.g. k4v2", name);
    spec.kind = KvModeName::Kind::Uniform;
    spec.bits = KvHeadBits{kb, vb};
  } else if (std::strncmp(name, "adaptive:", 9) == 0) {
    const float b = std::strtof(name + 9, &end);
    TERN_CHECK_OR_RETURN(end != name + 9 && *end == '\0' && b >= 2.0f && b <= 8.0f, Error::InvalidArgument,
                         "KV mode '%s': adaptive:B with 2 <= B <= 8", name);
    spec.kind = KvModeName::Kind::Adaptive;
    spec.average_bits = b;
  } else {
    if (kv_mode_is_auto(name))
      return fail(Error::InvalidArgument, "KV mode 'auto' is resolved by the planner (plan_memory_auto), not here");
    return fail(Error::InvalidArgument,
                "unknown KV mode '%s' (fp16, f32, q8, q4, q3, q2, k4v2, adaptive:B, auto; aging: q4>2@96; "
                "heavy-hitter eviction: q4/hh)",
                name);
  }
  TERN_CHECK_OR_RETURN(aging == nullptr || spec.kind != KvModeName::Kind::Exact, Error::InvalidArgument,
                       "KV mode '%s': exact modes have nothing to age (age a quantized one, e.g. q4>2@96)", full_name);
  *out = spec;
  return Error::Ok;
}

Error make_kv_cache_spec(const KvModeRequest& request, const ModelConfig& config, const schema::KvProfile* calibrated,
                         KvHeadBits* bits, KvCacheSpec* out) {
  TERN_CHECK_OR_RETURN(out != nullptr, Error::InvalidArgument, "KV cache spec: null output");
  TERN_CHECK_OR_RETURN(request.dense_type == KvType::F16 || request.dense_type == KvType::F32, Error::InvalidArgument,
                       "unknown KV type %u", static_cast<unsigned>(request.dense_type));
  TERN_CHECK_OR_RETURN(request.eviction >= -1 && request.eviction <= 1, Error::InvalidArgument,
                       "kv_eviction %d (-1 default, 0 off, 1 on)", request.eviction);
  TERN_CHECK_OR_RETURN(request.sink_tokens >= -1 && request.recent_window >= -1, Error::InvalidArgument,
                       "KV sinks %d / window %d must be >= 0 (-1: default)", request.sink_tokens,
                       request.recent_window);
  const bool named = request.mode != nullptr && request.mode[0] != '\0';
  KvModeName mode;
  mode.exact_type = request.dense_type;
  if (named) TERN_RETURN_IF_ERROR(parse_kv_mode(request.mode, &mode));
  KvCacheSpec spec;
  std::snprintf(spec.name, sizeof spec.name, "%s", named ? request.mode : to_string(request.dense_type));
  KvCacheProfile& p = spec.profile;
  p.shape = kv_shape_of(config);
  switch (mode.kind) {
    case KvModeName::Kind::Exact:
      spec.dense_type = mode.exact_type;
      // Dense stays dense unless eviction is asked for: then a compressed cache whose every
      // head is exact (same precision) provides the sinks + window policy.
      if (request.eviction != 1 && !mode.heavy_hitter) {
        *out = spec;
        return Error::Ok;
      }
      p.exact_type = mode.exact_type;
      p.uniform = KvHeadBits{0, 0};
      break;
    case KvModeName::Kind::Uniform: p.uniform = mode.bits; break;
    case KvModeName::Kind::Adaptive:
      TERN_CHECK_OR_RETURN(bits != nullptr, Error::InvalidArgument, "adaptive KV mode without per-head storage");
      TERN_RETURN_IF_ERROR(kv_profile_for_average(calibrated, p.shape, mode.average_bits, bits, &p));
      break;
  }
  p.eviction = request.eviction == 0 ? KvEviction::None : KvEviction::Streaming;
  p.aged_bits = mode.aged_bits;
  p.aged_after_tokens = mode.aged_after_tokens;
  p.aged_after_percent = mode.aged_after_percent;
  if (request.sink_tokens >= 0) p.sink_tokens = static_cast<uint32_t>(request.sink_tokens);
  if (request.recent_window >= 0) p.recent_window = static_cast<uint32_t>(request.recent_window);
  if (mode.heavy_hitter) {
    TERN_CHECK_OR_RETURN(request.eviction != 0, Error::InvalidArgument,
                         "KV mode '%s' is an eviction policy; it cannot run with eviction off", request.mode);
    TERN_RETURN_IF_ERROR(kv_make_heavy_hitter(mode.equal_shares ? nullptr : calibrated, mode.hh_recent_percent,
                                              config.max_context, bits, &p));
  }
  TERN_RETURN_IF_ERROR(kv_profile_validate(p));
  spec.compressed = true;
  *out = spec;
  return Error::Ok;
}

bool kv_mode_is_auto(const char* name) { return name != nullptr && std::strcmp(name, "auto") == 0; }

namespace {

// Sum over heads of the recorded sensitivity at each head's widths; false when a width was
// not measured or a head lacks its sensitivities.
bool estimate_kl(const schema::KvProfile& p, const KvShape& shape, const KvHeadBits* bits, double* out) {
  const auto* heads = p.heads();
  const auto* widths = p.sensitivity_widths();
  const size_t count = static_cast<size_t>(shape.layers) * shape.kv_heads;
  if (heads == nullptr || widths == nullptr || widths->size() == 0 || heads->size() != count) return false;
  auto at = [&](const schema::KvHeadProfile& h, uint8_t width, double* v) {
    const auto* s = h.sensitivity();
    for (uint32_t i = 0; i < widths->size(); ++i)
      if (widths->Get(i) == width && s != nullptr && i < s->size()) return (*v = s->Get(i)), true;
    return false;
  };
  double total = 0;
  for (const schema::KvHeadProfile* h : *heads) {
    if (h == nullptr || h->layer() >= shape.layers || h->kv_head() >= shape.kv_heads) return false;
    const KvHeadBits b = bits[static_cast<size_t>(h->layer()) * shape.kv_heads + h->kv_head()];
    if (b.exact()) continue;
    double k = 0, v = 0;
    if (!at(*h, b.key_bits, &k) || !at(*h, b.value_bits, &v)) return false;
    total += 0.5 * (k + v);
  }
  *out = total;
  return true;
}

}  // namespace

size_t kv_auto_candidates(const schema::KvProfile* calibrated, const KvShape& shape, KvHeadBits* bits,
                          KvAutoCandidate* out) {
  size_t n = 0;
  const size_t heads = static_cast<size_t>(shape.layers) * shape.kv_heads;
  bool all_estimated = calibrated != nullptr;
  auto add = [&](const char* name, bool has_bits) {
    if (n >= kKvAutoMaxCandidates) return;
    KvAutoCandidate& c = out[n++];
    std::snprintf(c.name, sizeof c.name, "%s", name);
    c.estimated_kl = 0.0;
    c.estimated = !has_bits || (calibrated != nullptr && estimate_kl(*calibrated, shape, bits, &c.estimated_kl));
    all_estimated = all_estimated && c.estimated;
  };
  add("fp16", false);
  for (uint8_t w : {8, 4, 3, 2}) {
    for (size_t i = 0; i < heads; ++i) bits[i] = KvHeadBits{w, w};
    char name[8];
    std::snprintf(name, sizeof name, "q%u", w);
    add(name, true);
  }
  if (calibrated != nullptr && calibrated->allocations() != nullptr) {
    for (const schema::KvAllocation* a : *calibrated->allocations()) {
      if (a == nullptr) continue;
      KvCacheProfile p;
      if (kv_profile_for_average(calibrated, shape, a->average_bits(), bits, &p) != Error::Ok) continue;
      char name[32];
      std::snprintf(name, sizeof name, "adaptive:%g", static_cast<double>(a->average_bits()));
      add(name, true);
    }
  }
  // One rule for all: estimates only when every candidate has one.
  for (size_t i = 0; i < n; ++i) out[i].estimated = all_estimated;
  return n;
}

KvCacheSpec uniform_kv_cache_spec(const KvShape& shape, KvHeadBits bits, const char* name) {
  KvCacheSpec spec;
  spec.compressed = true;
  spec.profile.shape = shape;
  spec.profile.uniform = bits;
  std::snprintf(spec.name, sizeof spec.name, "%s", name);
  return spec;
}

size_t kv_cache_arena_bytes(const KvCacheSpec& spec, uint32_t tokens) {
  return spec.compressed ? kv_bytes_for_tokens(spec.profile, tokens)
                         : dense_kv_arena_bytes(spec.dense_type, spec.profile.shape, tokens);
}

double kv_cache_bytes_per_token(const KvCacheSpec& spec) {
  return spec.compressed ? kv_bytes_per_token(spec.profile)
                         : static_cast<double>(dense_kv_bytes_per_token(spec.dense_type, spec.profile.shape));
}

size_t kv_cache_scores_per_head(const KvCacheSpec& spec, uint32_t group, uint32_t tokens) {
  if (!spec.compressed) return dense_attention_scores_per_head(group, tokens);
  return static_cast<size_t>(std::min<uint32_t>(group, kKvMaxQueries)) * kv_resident_tokens(spec.profile, tokens);
}

uint32_t KvCapacityLadder::at(uint32_t step) const {
  if (spec->compressed) return static_cast<uint32_t>(kv_tokens_for_blocks(spec->profile, step));
  return first + step;
}

Result<KvCapacityLadder> kv_capacity_ladder(const KvCacheSpec& spec, uint32_t min_tokens, uint32_t model_context,
                                            uint32_t context_request) {
  KvCapacityLadder ladder;
  ladder.spec = &spec;
  if (!spec.compressed) {
    uint32_t max_tokens = model_context;
    if (context_request > 0 && context_request < max_tokens) max_tokens = context_request;
    ladder.first = min_tokens < max_tokens ? (min_tokens == 0 ? 1 : min_tokens) : max_tokens;
    ladder.steps = max_tokens - ladder.first;
    return ladder;
  }
  const KvCacheProfile& p = spec.profile;
  TERN_RETURN_IF_ERROR(kv_profile_validate(p));
  const uint64_t fixed = kv_tokens_for_blocks(p, 0);
  uint64_t max_blocks = model_context <= fixed ? 0 : (model_context - fixed) / p.block_tokens;
  if (context_request > 0) max_blocks = std::min<uint64_t>(max_blocks, kv_blocks_for_tokens(p, context_request));
  TERN_CHECK_OR_RETURN(kv_tokens_for_blocks(p, max_blocks) <= UINT32_MAX, Error::OutOfRange,
                       "KV cache of %llu positions",
                       static_cast<unsigned long long>(kv_tokens_for_blocks(p, max_blocks)));
  ladder.first = static_cast<uint32_t>(fixed);
  ladder.steps = static_cast<uint32_t>(max_blocks);
  return ladder;
}

uint32_t kv_cache_capacity(const KvCacheSpec& spec, uint32_t tokens) {
  if (!spec.compressed) return tokens;
  const uint64_t capacity = kv_tokens_for_blocks(spec.profile, kv_blocks_for_tokens(spec.profile, tokens));
  return capacity > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(capacity);
}

uint64_t kv_layout_identity(const KvCacheSpec& spec, uint32_t capacity) {
  uint64_t h = kFnv1aBasis;
  auto mix = [&](uint64_t v) { h = fnv1a_u64(h, v); };
  const KvShape& shape = spec.profile.shape;
  mix(spec.compressed), mix(static_cast<uint64_t>(spec.dense_type)), mix(capacity);
  mix(shape.layers), mix(shape.kv_heads), mix(shape.head_dim);
  if (spec.compressed) {
    const KvCacheProfile& p = spec.profile;
    mix(static_cast<uint64_t>(p.exact_type)), mix(p.sink_tokens), mix(p.recent_window), mix(p.block_tokens);
    mix(p.value_group), mix(p.rotate), mix(static_cast<uint64_t>(p.eviction));
    if (p.aging()) mix(p.aged_bits), mix(p.aged_after_tokens), mix(p.aged_after_percent);
    const bool hh = p.eviction == KvEviction::HeavyHitter;
    if (hh) mix(p.max_head_blocks), mix(p.hh_recent_percent);
    for (uint32_t l = 0; l < shape.layers; ++l)
      for (uint32_t k = 0; k < shape.kv_heads; ++k) {
        mix(p.bits_of(l, k).key_bits), mix(p.bits_of(l, k).value_bits);
        if (hh) mix(p.bits_of(l, k).block_share);
      }
  }
  return h;
}

Result<KvCache*> create_kv_cache(const KvCacheSpec& spec, uint32_t tokens, ArenaAllocator& arena) {
  if (!spec.compressed) return create_dense_kv_cache(spec.dense_type, spec.profile.shape, tokens, arena);
  TERN_ASSIGN_OR_RETURN(CompressedKvCache * cache, CompressedKvCache::create(spec.profile, tokens, arena));
  return static_cast<KvCache*>(cache);
}

}  // namespace tern
