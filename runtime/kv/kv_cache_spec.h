// Which KV cache a session gets, decided in one place. A KV mode name and its overrides
// (sinks, window, eviction) become a KvCacheSpec: a dense cache of one precision, or a
// compressed cache with a per-head profile. The planner sizes the cache from the spec, the
// session builds it from the spec, and the evaluation tools make specs of their own; none
// of them branches on the kind again.
//
// Adding a KV mode: teach parse_kv_mode its name, and make_kv_cache_spec how it becomes a
// spec (runtime/kv/README.md).
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/error.h"
#include "runtime/base/arena.h"
#include "runtime/kv/kv_cache.h"
#include "runtime/kv/kv_policy.h"
#include "runtime/model/model_config.h"

namespace tern {

namespace schema {
struct KvProfile;
}

// A KV mode name, parsed: "fp16" / "f32" (exact), "q8", "q4", "q3", "q2" (every head at that
// width), "k4v2" (keys and values at different widths), "adaptive:B" (the bundle's
// calibrated per-head profile at B average bits). The same names in every tool.
//
// Aging tiers: any compressed name followed by ">A@N" (e.g. "q4>2@96", "k4v2>2@64",
// "adaptive:3>2@128") or ">A@P%" ("q3>2@50%"): blocks that are more than N tokens past the
// exact window (N rounded up to whole blocks of G), or older than the newest P % of the
// middle blocks the cache holds (rounded down, at least one), keep the top min(width, A)
// bits of their stored key and value codes (kv_truncate_*); exact heads and sink tokens stay
// exact (runtime/kv/kv_policy.h).
//
// Heavy-hitter eviction: any name followed by "/hh" (e.g. "q4/hh", "adaptive:3/hh",
// "fp16/hh"): per-head token budgets from the bundle's calibrated attention entropy, each
// head dropping the block it attends to least among the older ones (runtime/kv/kv_policy.h);
// "/hh=equal": every head's budget equal; "@R%" after either: the newest R % of a head's
// blocks are never dropped (default 90, e.g. "q4/hh@50%"). Not with aging tiers.
struct KvModeName {
  enum class Kind { Exact, Uniform, Adaptive };
  Kind kind = Kind::Exact;
  KvType exact_type = KvType::F16;
  KvHeadBits bits;            // Uniform
  float average_bits = 0.0f;  // Adaptive
  uint8_t aged_bits = 0;      // aging: 0 off
  uint32_t aged_after_tokens = 0;
  uint8_t aged_after_percent = 0;  // ">A@P%": the newest P % of the middle blocks stay at full width
  bool heavy_hitter = false;       // "/hh"
  bool equal_shares = false;       // "/hh=equal"
  uint8_t hh_recent_percent = 90;  // "/hh@R%"
};
// The heavy-hitter suffix alone ("/hh", "/hh=equal", either + "@R%"); tools with mode names
// of their own split it off with std::strchr(name, '/').
Error parse_kv_heavy_hitter(const char* suffix, bool* equal_shares, uint8_t* recent_percent);
Error parse_kv_mode(const char* name, KvModeName* out);
// The aging suffix alone (">A@N", as in parse_kv_mode); tools with mode names of their own
// (tern-eval's uniform:B) split it off with std::strchr(name, '>').
Error parse_kv_aging(const char* suffix, uint8_t* aged_bits, uint32_t* aged_after_tokens, uint8_t* aged_after_percent);

// kv_mode "auto": the planner picks the mode (plan_memory_auto, runtime/engine/memory_plan.h).
bool kv_mode_is_auto(const char* name);

// The modes "auto" chooses from: "fp16", "q8", "q4", "q3", "q2", then "adaptive:B" for every
// allocation the bundle holds, each with its KL(exact || mode) estimated from the bundle's
// calibration: the sum over heads of the head's recorded sensitivity (mean KL when that head
// alone is quantized) at its width (a head with different key and value widths: the mean of
// the two; exact heads and fp16: 0). `estimated` is false for every candidate when the
// bundle has no calibration, or its sensitivities do not cover a candidate's widths; the
// planner then prefers the most bits per element (fp16, q8, q4, q3, q2).
struct KvAutoCandidate {
  char name[32] = "";
  double estimated_kl = 0.0;
  bool estimated = false;
};
inline constexpr size_t kKvAutoMaxCandidates = 24;
// Fills up to kKvAutoMaxCandidates entries of `out`; returns the count. `bits` has
// shape.layers * shape.kv_heads entries (scratch).
size_t kv_auto_candidates(const schema::KvProfile* calibrated, const KvShape& shape, KvHeadBits* bits,
                          KvAutoCandidate* out);

// What the caller asked for (the KV fields of ModelParams / tern_model_params).
struct KvModeRequest {
  const char* mode = nullptr;       // a parse_kv_mode name; null or "": a dense cache of dense_type
  KvType dense_type = KvType::F32;  // the deprecated kv_type field
  int32_t sink_tokens = -1;         // -1: the mode's default (4; adaptive: the bundle's)
  int32_t recent_window = -1;       // -1: the mode's default (32; adaptive: the bundle's)
  int32_t eviction = -1;            // -1: on for compressed modes, off for dense; 0 off; 1 on
};

struct KvCacheSpec {
  bool compressed = false;
  KvType dense_type = KvType::F32;  // dense caches
  KvCacheProfile profile;           // compressed caches (profile.head_bits may point at caller storage)
  char name[32] = "f32";            // the resolved mode: "f32", "q4", "adaptive:2.5", ...

  bool evicting() const { return compressed && profile.eviction != KvEviction::None; }
};

// The spec for `request` on a model of `config`. `bits` has config.layers * config.kv_heads
// entries (per-head widths of adaptive modes; out->profile.head_bits then points at it).
// `calibrated` is the bundle's KV profile, or null. InvalidArgument for a bad name or
// override, NotFound for an adaptive average the bundle lacks (the message lists those it has).
Error make_kv_cache_spec(const KvModeRequest& request, const ModelConfig& config, const schema::KvProfile* calibrated,
                         KvHeadBits* bits, KvCacheSpec* out);

// A compressed spec of every head at `bits` with the default layout (tools, tests).
KvCacheSpec uniform_kv_cache_spec(const KvShape& shape, KvHeadBits bits, const char* name);

// Arena bytes of a cache holding `tokens` positions (object, tables, alignment included):
// creating one in an arena with this many free bytes always succeeds.
size_t kv_cache_arena_bytes(const KvCacheSpec& spec, uint32_t tokens);
// Marginal KV bytes per position over all layers and heads.
double kv_cache_bytes_per_token(const KvCacheSpec& spec);
// Floats of attention scores per KV head the cache needs for `group` query heads.
size_t kv_cache_scores_per_head(const KvCacheSpec& spec, uint32_t group, uint32_t tokens);

// The capacities a cache of `spec` can have, ascending: at(0) .. at(steps). Dense caches
// hold any count from `min_tokens` to the limit; compressed ones S + M*G + W + G positions,
// from no middle block up to the most that stay within `model_context` (and that reach
// `context_request`, when given).
struct KvCapacityLadder {
  const KvCacheSpec* spec = nullptr;
  uint32_t first = 0;  // dense: the smallest capacity
  uint32_t steps = 0;
  uint32_t at(uint32_t step) const;
};
Result<KvCapacityLadder> kv_capacity_ladder(const KvCacheSpec& spec, uint32_t min_tokens, uint32_t model_context,
                                            uint32_t context_request);

// The capacity create_kv_cache gives for `tokens`: exactly that for a dense cache, rounded up
// to whole middle blocks (S + M*G + W + G) for a compressed one.
uint32_t kv_cache_capacity(const KvCacheSpec& spec, uint32_t tokens);

// A fingerprint of the cache a spec builds at `capacity` (kind, precisions, layout, per-head
// widths): saved session states carry it so they only load into the same layout.
uint64_t kv_layout_identity(const KvCacheSpec& spec, uint32_t capacity);

// Builds the cache inside `arena` (storage and object; nothing to free). Its capacity is
// `tokens` (a value the ladder offers: compressed caches round up to a whole block).
Result<KvCache*> create_kv_cache(const KvCacheSpec& spec, uint32_t tokens, ArenaAllocator& arena);

}  // namespace tern
