#include "runtime/kv/kv_profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels/kv_quant.h"
#include "schema/bundle_generated.h"

namespace tern {

namespace {

constexpr float kAverageTolerance = 1e-3f;

// "2, 2.5, 3" into buf (stack, truncated if long): the averages a bundle offers.
void list_averages(const schema::KvProfile& profile, char* buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  auto append = [&](float avg) {
    if (used + 1 >= size) return;
    const int n = std::snprintf(buf + used, size - used, "%s%g", used ? ", " : "", static_cast<double>(avg));
    if (n > 0) used += static_cast<size_t>(n) < size - used ? static_cast<size_t>(n) : size - used - 1;
  };
  if (const auto* list = profile.allocations()) {
    for (const schema::KvAllocation* a : *list)
      if (a != nullptr) append(a->average_bits());
  } else {
    append(profile.average_bits());
  }
}

// The bits of one allocation into `bits` (sink heads, width 0, exact), then the profile's
// window, sinks and groups into `out`.
Error from_allocation(const schema::KvProfile& profile, const schema::KvAllocation& a, const KvShape& shape,
                      KvHeadBits* bits, KvCacheProfile* out) {
  const size_t heads = static_cast<size_t>(shape.layers) * shape.kv_heads;
  const auto* kb = a.key_bits();
  const auto* vb = a.value_bits();
  TERN_CHECK_OR_RETURN(kb != nullptr && vb != nullptr && kb->size() == heads && vb->size() == heads,
                       Error::InvalidBundle, "KV allocation at %g bits lists %u/%u widths, the model has %zu heads",
                       static_cast<double>(a.average_bits()), kb ? kb->size() : 0u, vb ? vb->size() : 0u, heads);
  for (size_t i = 0; i < heads; ++i) {
    const KvHeadBits b{kb->Get(static_cast<uint32_t>(i)), vb->Get(static_cast<uint32_t>(i))};
    TERN_CHECK_OR_RETURN(b.exact() || (kv_bits_supported(b.key_bits) && kv_bits_supported(b.value_bits)),
                         Error::InvalidBundle, "KV allocation at %g bits: head %zu.%zu has %u/%u bits",
                         static_cast<double>(a.average_bits()), i / shape.kv_heads, i % shape.kv_heads, b.key_bits,
                         b.value_bits);
    bits[i] = b;
  }
  out->shape = shape;
  out->sink_tokens = profile.sink_tokens();
  out->recent_window = profile.recent_window();
  if (profile.group_size() != 0) out->block_tokens = profile.group_size();
  if (profile.value_group() != 0) out->value_group = profile.value_group();
  out->head_bits = bits;
  return kv_profile_validate(*out);
}

}  // namespace

Error kv_profile_from_bundle(const schema::KvProfile& profile, const KvShape& shape, KvHeadBits* bits,
                             KvCacheProfile* out) {
  const size_t heads = static_cast<size_t>(shape.layers) * shape.kv_heads;
  const auto* list = profile.heads();
  TERN_CHECK_OR_RETURN(list != nullptr && list->size() == heads, Error::InvalidBundle,
                       "KV profile lists %u heads, the model has %zu", list ? list->size() : 0u, heads);
  // 0xFF marks a head not yet listed, so gaps and duplicates are both caught.
  for (size_t i = 0; i < heads; ++i) bits[i] = KvHeadBits{0xFF, 0xFF};
  for (const schema::KvHeadProfile* h : *list) {
    TERN_CHECK_OR_RETURN(h != nullptr && h->layer() < shape.layers && h->kv_head() < shape.kv_heads,
                         Error::InvalidBundle, "KV profile head outside %u layers x %u heads", shape.layers,
                         shape.kv_heads);
    KvHeadBits& slot = bits[static_cast<size_t>(h->layer()) * shape.kv_heads + h->kv_head()];
    TERN_CHECK_OR_RETURN(slot.key_bits == 0xFF, Error::InvalidBundle, "KV profile lists head %u.%u twice", h->layer(),
                         h->kv_head());
    const KvHeadBits b = h->sink() ? KvHeadBits{0, 0} : KvHeadBits{h->key_bits(), h->value_bits()};
    TERN_CHECK_OR_RETURN(b.exact() || (kv_bits_supported(b.key_bits) && kv_bits_supported(b.value_bits)),
                         Error::InvalidBundle, "KV profile head %u.%u: %u/%u bits", h->layer(), h->kv_head(),
                         b.key_bits, b.value_bits);
    slot = b;
  }
  out->shape = shape;
  out->sink_tokens = profile.sink_tokens();
  out->recent_window = profile.recent_window();
  if (profile.group_size() != 0) out->block_tokens = profile.group_size();
  out->head_bits = bits;
  return kv_profile_validate(*out);
}

Error kv_profile_for_average(const schema::KvProfile* profile, const KvShape& shape, float average_bits,
                             KvHeadBits* bits, KvCacheProfile* out) {
  TERN_CHECK_OR_RETURN(bits != nullptr && out != nullptr, Error::InvalidArgument, "null output");
  TERN_CHECK_OR_RETURN(profile != nullptr, Error::NotFound,
                       "the bundle has no calibrated KV profile (convert it with --calibrate) for adaptive:%g",
                       static_cast<double>(average_bits));
  if (const auto* list = profile->allocations(); list != nullptr && list->size() > 0) {
    for (const schema::KvAllocation* a : *list) {
      if (a != nullptr && std::fabs(a->average_bits() - average_bits) < kAverageTolerance)
        return from_allocation(*profile, *a, shape, bits, out);
    }
    char averages[160];
    list_averages(*profile, averages, sizeof(averages));
    return fail(Error::NotFound, "the bundle's KV profile has no allocation at %g average bits (it has adaptive:%s)",
                static_cast<double>(average_bits), averages);
  }
  // Bundles calibrated before allocation lists: only the primary allocation.
  TERN_CHECK_OR_RETURN(std::fabs(profile->average_bits() - average_bits) < kAverageTolerance, Error::NotFound,
                       "the bundle's KV profile is calibrated at %g average bits, not %g",
                       static_cast<double>(profile->average_bits()), static_cast<double>(average_bits));
  return kv_profile_from_bundle(*profile, shape, bits, out);
}

Error kv_heavy_hitter_shares(const schema::KvProfile* calibrated, KvHeadBits* bits, KvCacheProfile* out) {
  TERN_CHECK_OR_RETURN(bits != nullptr && out != nullptr, Error::InvalidArgument, "null output");
  const KvShape& shape = out->shape;
  const size_t heads = static_cast<size_t>(shape.layers) * shape.kv_heads;
  for (size_t i = 0; i < heads; ++i) {
    bits[i] = out->bits_of(static_cast<uint32_t>(i / shape.kv_heads), static_cast<uint32_t>(i % shape.kv_heads));
    bits[i].block_share = kKvShareUnit;
  }
  out->head_bits = bits;
  const auto* list = calibrated != nullptr ? calibrated->heads() : nullptr;
  if (list == nullptr || list->size() != heads) return Error::Ok;
  double mean = 0;
  for (const schema::KvHeadProfile* h : *list) {
    TERN_CHECK_OR_RETURN(h != nullptr && h->layer() < shape.layers && h->kv_head() < shape.kv_heads,
                         Error::InvalidBundle, "KV profile head outside %u layers x %u heads", shape.layers,
                         shape.kv_heads);
    mean += std::max(0.0f, h->shannon_entropy()) / static_cast<double>(heads);
  }
  if (!(mean > 0)) return Error::Ok;
  // share_h = floor(32 * weight_h * sum(bytes) / sum(weight * bytes)).
  // The square root: linear weights gave bitllama2c-3M's diffuse heads so many blocks that
  // its KL at equal bytes rose 11 % over StreamingLLM (docs/perf/2026-11-25-kv-heavy-hitter.md).
  auto weight = [&](float e) { return std::sqrt(std::max<double>(e, mean / 4)); };
  double bytes = 0, weighted = 0;
  for (const schema::KvHeadProfile* h : *list) {
    const double b = static_cast<double>(kv_head_block_bytes(*out, bits[h->layer() * shape.kv_heads + h->kv_head()]));
    bytes += b;
    weighted += weight(h->shannon_entropy()) * b;
  }
  for (const schema::KvHeadProfile* h : *list) {
    const double w = weight(h->shannon_entropy());
    const double share = std::floor(kKvShareUnit * w * bytes / weighted);
    bits[h->layer() * shape.kv_heads + h->kv_head()].block_share = static_cast<uint8_t>(std::min(share, 255.0));
  }
  return Error::Ok;
}

Error kv_make_heavy_hitter(const schema::KvProfile* calibrated, uint8_t recent_percent, uint32_t context,
                           KvHeadBits* bits, KvCacheProfile* out) {
  TERN_CHECK_OR_RETURN(bits != nullptr && out != nullptr, Error::InvalidArgument,
                       "heavy-hitter KV mode without per-head storage");
  out->eviction = KvEviction::HeavyHitter;
  out->hh_recent_percent = recent_percent;
  TERN_RETURN_IF_ERROR(kv_heavy_hitter_shares(calibrated, bits, out));
  out->max_head_blocks = kv_heavy_hitter_max_blocks(*out, context);
  return Error::Ok;
}

}  // namespace tern
