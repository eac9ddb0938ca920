// Turns a KV mode name ("fp16", "q4", "k4v2", "adaptive:2.5", see parse_kv_mode) and a
// bundle's calibrated KV profile into the cache profile a session is built with. Shared by
// the session, the planner and the evaluation tools so a mode means the same everywhere.
#pragma once

#include "platform/error.h"
#include "runtime/kv/kv_policy.h"

namespace tern {

namespace schema {
struct KvProfile;
}

// Fills `out` from a bundle's calibrated profile (sink heads exact, the rest at their
// recorded widths), using `bits` (shape.layers * shape.kv_heads entries) as the head table.
// The window, sinks and group come from the bundle; other fields keep `out`'s values.
// (Bundles written before allocation lists; kv_profile_for_average reads both.)
Error kv_profile_from_bundle(const schema::KvProfile& profile, const KvShape& shape, KvHeadBits* bits,
                             KvCacheProfile* out);

// Fills `out` with the per-head bits of the bundle's calibrated allocation at
// `average_bits` (`bits` has shape.layers * shape.kv_heads entries and becomes
// out->head_bits; sink heads exact). The window, sink count and group come from the
// bundle. NotFound (listing the averages it has) when the bundle holds no allocation at
// that average; NotFound when the bundle is not calibrated (profile null).
Error kv_profile_for_average(const schema::KvProfile* profile, const KvShape& shape, float average_bits,
                             KvHeadBits* bits, KvCacheProfile* out);

// Per-head middle shares for heavy-hitter eviction (KvHeadBits::block_share): from the
// calibrated attention entropy (bits) of each KV head, share_h proportional to
// sqrt(max(entropy_h, mean / 4)) (a focused head keeps fewer blocks, a diffuse one more),
// scaled so the byte-weighted mean share is at most kKvShareUnit (the same bytes as equal
// shares) and capped at 255. `bits` (shape.layers * shape.kv_heads entries) becomes
// out->head_bits (filled from out->uniform when it was null). Equal shares when
// `calibrated` is null or lists no entropies.
Error kv_heavy_hitter_shares(const schema::KvProfile* calibrated, KvHeadBits* bits, KvCacheProfile* out);

// Turns `out` into a heavy-hitter profile ("/hh" modes, runtime/kv/kv_policy.h): the
// eviction, the protected recent share, per-head shares (from `calibrated`, or equal when it
// is null) and the cap of a model trained on `context` positions.
Error kv_make_heavy_hitter(const schema::KvProfile* calibrated, uint8_t recent_percent, uint32_t context,
                           KvHeadBits* bits, KvCacheProfile* out);

}  // namespace tern
