// Paths that are not regular files through the C API: tern_model_load, tern_plan and
// tern_session_state_load_file refuse a FIFO, a device, a directory and a socket at once with
// TERN_IO_ERROR naming what the path is. Before, a FIFO blocked each of them forever.
#include <gtest/gtest.h>

#include <string>

#include "include/tern.h"
#include "tests/support/bundle_util.h"
#include "tests/support/special_files.h"

namespace {

constexpr const char* kBundle = "tiny-austen-packed.tern";
constexpr double kSeconds = 20;  // a refusal takes microseconds; a blocked open never ends

// 0 when `st` is TERN_IO_ERROR whose message names `path` and `kind`; else which part failed.
int refused(tern_status st, const std::string& path, const std::string& kind) {
  if (st != TERN_IO_ERROR) return 10 + static_cast<int>(st);
  const std::string why = tern_last_error_message();
  return why.find(path) != std::string::npos && why.find(kind) != std::string::npos ? 0 : 3;
}

TEST(CApiSpecialFiles, ModelLoadRefusesEveryKind) {
  tern::testing::SpecialFiles special;
  for (const auto& [kind, path] : special.all()) {
    const int status = tern::testing::exit_status_within(kSeconds, [&, kind = kind, path = path] {
      tern_model* model = nullptr;
      return refused(tern_model_load(path.c_str(), nullptr, &model), path, kind);
    });
    EXPECT_EQ(status, 0) << kind << " " << path << " (-1: still blocked after " << kSeconds << " s)";
  }
}

TEST(CApiSpecialFiles, PlanRefusesEveryKind) {
  tern::testing::SpecialFiles special;
  for (const auto& [kind, path] : special.all()) {
    const int status = tern::testing::exit_status_within(kSeconds, [&, kind = kind, path = path] {
      size_t count = 0;
      return refused(tern_plan(path.c_str(), nullptr, nullptr, 0, nullptr, 0, &count), path, kind);
    });
    EXPECT_EQ(status, 0) << kind << " " << path << " (-1: still blocked after " << kSeconds << " s)";
  }
}

TEST(CApiSpecialFiles, StateLoadRefusesEveryKind) {
  TERN_REQUIRE_BUNDLE(kBundle);
  const std::string bundle = tern::testing::bundle_path(kBundle);
  tern::testing::SpecialFiles special;
  for (const auto& [kind, path] : special.all()) {
    const int status = tern::testing::exit_status_within(kSeconds, [&, kind = kind, path = path] {
      tern_model* model = nullptr;
      tern_session* session = nullptr;
      if (tern_model_load(bundle.c_str(), nullptr, &model) != TERN_OK) return 4;
      if (tern_session_create(model, nullptr, &session) != TERN_OK) return 5;
      const int r = refused(tern_session_state_load_file(session, path.c_str()), path, kind);
      tern_session_free(session);
      tern_model_free(model);
      return r;
    });
    EXPECT_EQ(status, 0) << kind << " " << path << " (-1: still blocked after " << kSeconds << " s)";
  }
}

}  // namespace
