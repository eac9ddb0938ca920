// Where the runtime tests find bundles: converted by the runtime_make_bundles fixture
// into the build tree (or, for cross builds, taken from TERN_HOST_BUNDLE_DIR).
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/test_util.h"

namespace tern::testing {

inline std::string bundle_dir() {
  const char* env = std::getenv("TERN_TEST_BUNDLE_DIR");
  return env != nullptr && *env != '\0' ? env : TERN_TEST_BUNDLE_DIR_DEFAULT;
}
inline std::string bundle_path(const std::string& name) { return bundle_dir() + "/" + name; }
inline bool bundle_exists(const std::string& name) { return std::ifstream(bundle_path(name)).good(); }

}  // namespace tern::testing

// Skips when the bundle (and its shared source) is absent; fails under CI, or when the
// source is there but the bundle is not (the conversion fixture did not run or failed).
#define TERN_REQUIRE_BUNDLE(name, shared_source)                                               \
  do {                                                                                         \
    TERN_REQUIRE_SHARED(shared_source);                                                        \
    TERN_REQUIRE_ASSET(::tern::testing::bundle_exists(name),                                   \
                       "bundle missing: " << ::tern::testing::bundle_path(name),               \
                       "bundle not converted (run ctest, which converts it first): "           \
                           << ::tern::testing::bundle_path(name));                             \
  } while (0)
