#include "runtime/base/version.h"

#ifndef TERN_VERSION
#error "TERN_VERSION is set by the build"
#endif

namespace tern {

const char* version_string() { return TERN_VERSION; }

}  // namespace tern
