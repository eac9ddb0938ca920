// main() of every GoogleTest suite. ctest runs a binary whose cases read third-party files from
// ../shared as two entries (tern_add_test's THIRD_PARTY filter): --tern-part=own runs the
// self-contained cases, --tern-part=third-party the others. The second exits with 77 (ctest's
// SKIP_RETURN_CODE) when every case it ran was skipped, so ctest reports Skipped, not Passed.
// Each entry checks the filter: a self-contained case that reads ../shared fails
// (TERN_REQUIRE_SHARED), and so does a case in the third-party entry that reads nothing there.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/test_util.h"

namespace {

constexpr int kAllSkipped = 77;

class ThirdPartyFilterCheck : public ::testing::EmptyTestEventListener {
 public:
  void OnTestStart(const ::testing::TestInfo&) override { tern::testing::begin_case(); }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (tern::testing::test_part() == tern::testing::TestPart::ThirdParty && !tern::testing::case_read_shared()) {
      misplaced.push_back(std::string(info.test_suite_name()) + "." + info.name());
    }
  }
  std::vector<std::string> misplaced;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--tern-part=own") == 0) {
      tern::testing::set_test_part(tern::testing::TestPart::Own);
    } else if (std::strcmp(argv[i], "--tern-part=third-party") == 0) {
      tern::testing::set_test_part(tern::testing::TestPart::ThirdParty);
    } else {
      std::fprintf(stderr, "unknown argument %s (expected --tern-part=own|third-party and gtest flags)\n", argv[i]);
      return 2;
    }
  }
  auto* check = new ThirdPartyFilterCheck;  // owned by gtest's listener list
  ::testing::UnitTest::GetInstance()->listeners().Append(check);
  const int rc = RUN_ALL_TESTS();
  if (!check->misplaced.empty()) {
    std::fprintf(stderr,
                 "\nthese cases ran in the third-party entry but read nothing under ../shared; take them "
                 "out of the binary's THIRD_PARTY filter:\n");
    for (const std::string& name : check->misplaced) std::fprintf(stderr, "  %s\n", name.c_str());
    return 1;
  }
  if (rc != 0) return rc;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  if (tern::testing::test_part() == tern::testing::TestPart::ThirdParty && unit.test_to_run_count() > 0 &&
      unit.skipped_test_count() == unit.test_to_run_count()) {
    std::string needs;
    for (const std::string& path : tern::testing::shared_files_missing()) needs += (needs.empty() ? "" : ", ") + path;
    std::printf("TEST SKIPPED: every case needs ../shared: %s\n", needs.c_str());
    return kAllSkipped;
  }
  return 0;
}
