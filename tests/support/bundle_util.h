// Where the runtime tests find bundles: converted by the runtime_make_bundles and
// runtime_make_shared_bundles fixtures into the build tree (or, for cross builds, taken from
// TERN_HOST_BUNDLE_DIR).
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/support/test_util.h"

namespace tern::testing {

inline std::string bundle_dir() {
  const char* env = std::getenv("TERN_TEST_BUNDLE_DIR");
  return env != nullptr && *env != '\0' ? env : TERN_TEST_BUNDLE_DIR_DEFAULT;
}
inline std::string bundle_path(const std::string& name) { return bundle_dir() + "/" + name; }
inline bool bundle_exists(const std::string& name) { return std::ifstream(bundle_path(name)).good(); }

}  // namespace tern::testing

// The bundle converted from the repository's files (runtime_make_bundles): fails when absent.
#define TERN_REQUIRE_BUNDLE(name)                                                                               \
  ASSERT_TRUE(::tern::testing::bundle_exists(name)) << "bundle missing: " << ::tern::testing::bundle_path(name) \
                                                    << " (ctest converts it first, in runtime_make_bundles)"

// A bundle converted from a third-party checkpoint under ../shared (runtime_make_shared_bundles):
// the case is skipped without ../shared (TERN_REQUIRE_SHARED), and fails when ../shared is
// there but the bundle is not.
#define TERN_REQUIRE_SHARED_BUNDLE(name, shared_source)                                                                \
  do {                                                                                                                 \
    TERN_REQUIRE_SHARED(shared_source);                                                                                \
    ASSERT_TRUE(::tern::testing::bundle_exists(name)) << "bundle missing: " << ::tern::testing::bundle_path(name)      \
                                                      << " (ctest converts it first, in runtime_make_shared_bundles)"; \
  } while (0)
