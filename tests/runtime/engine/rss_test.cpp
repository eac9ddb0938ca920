// The process stays within the memory budget it states: load at the smallest budget the
// runtime accepts (and at a larger one), fill the context, compare the peak RSS.
// Its own binary, so no other test's allocations raise the high-water mark.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "include/tern.h"
#include "tests/support/bundle_util.h"

namespace {

uint64_t peak_rss_bytes() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

// "... at least N bytes ..." from the BudgetTooSmall message.
uint64_t stated_minimum(const char* message) {
  const char* at = std::strstr(message, "at least ");
  return at == nullptr ? 0 : std::strtoull(at + 9, nullptr, 10);
}

int ignore(const char*, size_t, void*) { return 0; }

TEST(PeakRss, StaysWithinTheBudgetFromTheMinimumUp) {
  if (std::getenv("TERN_SLOW_EMULATION") != nullptr) {
    GTEST_SKIP() << "under qemu-user the emulator's own memory is part of the RSS";
  }
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's shadow memory is part of the RSS";
#endif
  TERN_REQUIRE_BUNDLE("tiny-austen-packed.tern");
  const std::string path = tern::testing::bundle_path("tiny-austen-packed.tern");
  tern_model_params mp = tern_model_default_params();
  mp.memory_budget_bytes = 1;
  tern_model* model = nullptr;
  ASSERT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_BUDGET_TOO_SMALL);
  const uint64_t minimum = stated_minimum(tern_last_error_message());
  ASSERT_GT(minimum, 0u) << tern_last_error_message();

  for (uint64_t budget : {minimum, minimum + (uint64_t{2} << 20)}) {
    mp.memory_budget_bytes = budget;
    ASSERT_EQ(tern_model_load(path.c_str(), &mp, &model), TERN_OK) << tern_last_error_message();
    tern_model_info info;
    ASSERT_EQ(tern_model_get_info(model, &info), TERN_OK);
    tern_session* session = nullptr;
    ASSERT_EQ(tern_session_create(model, nullptr, &session), TERN_OK);
    tern_generate_params gp = tern_generate_default_params();
    gp.max_new_tokens = info.context_tokens;  // runs until the context is full
    tern_generate_stats st{};
    ASSERT_EQ(tern_generate(session, "It is a truth", 13, &gp, ignore, nullptr, &st), TERN_OK)
        << tern_last_error_message();
    EXPECT_EQ(st.stop_reason, TERN_STOP_CONTEXT_FULL);
    const uint64_t peak = peak_rss_bytes();
    std::printf("budget %llu bytes (context %u): peak RSS %llu bytes\n", static_cast<unsigned long long>(budget),
                info.context_tokens, static_cast<unsigned long long>(peak));
    EXPECT_LE(peak, budget);
    tern_session_free(session);
    tern_model_free(model);
  }
}

}  // namespace
