#include "runtime/kv_profile.h"

#include <cmath>

#include "runtime/kv_compressed_cache.h"
#include "schema/bundle_generated.h"

namespace tern {

Error kv_profile_for_average(const schema::KvProfile* profile, const KvShape& shape, float average_bits,
                             KvHeadBits* bits, KvCacheProfile* out) {
  TERN_CHECK_OR_RETURN(bits != nullptr && out != nullptr, Error::InvalidArgument, "null output");
  TERN_CHECK_OR_RETURN(profile != nullptr, Error::NotFound,
                       "the bundle has no calibrated KV profile (convert it with --calibrate) for adaptive:%g",
                       static_cast<double>(average_bits));
  TERN_CHECK_OR_RETURN(std::fabs(profile->average_bits() - average_bits) < 1e-3f, Error::NotFound,
                       "the bundle's KV profile is calibrated at %g average bits, not %g",
                       static_cast<double>(profile->average_bits()), static_cast<double>(average_bits));
  return kv_profile_from_bundle(*profile, shape, bits, out);
}

}  // namespace tern
