// What the C API's files share: Error as tern_status, the check for NULL arguments, and the
// sampler parameters converted (one field list for both directions).
#pragma once

#include "include/tern.h"
#include "platform/error.h"
#include "runtime/engine/sampler.h"

namespace tern {

inline tern_status status(Error e) { return static_cast<tern_status>(static_cast<int>(e)); }

inline tern_status null_argument(const char* function, const char* argument) {
  return status(fail(Error::InvalidArgument, "%s: %s is NULL", function, argument));
}

#define TERN_C_REQUIRE_(ptr)                                    \
  do {                                                          \
    if ((ptr) == nullptr) return null_argument(__func__, #ptr); \
  } while (0)

// The sampler's fields, named alike in tern_sampler_params and SamplerParams: one list for
// the parameters in and the defaults out.
#define TERN_SAMPLER_PARAM_FIELDS_(X) \
  X(temperature)                      \
  X(top_k)                            \
  X(top_p)                            \
  X(min_p)                            \
  X(repeat_penalty)                   \
  X(repeat_last_n)                    \
  X(seed)                             \
  X(presence_penalty)                 \
  X(frequency_penalty)

inline SamplerParams to_cpp(const tern_sampler_params& p) {
  SamplerParams s;
#define TERN_COPY_(field) s.field = p.field;
  TERN_SAMPLER_PARAM_FIELDS_(TERN_COPY_)
#undef TERN_COPY_
  return s;
}

}  // namespace tern
