#include "platform/log.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "platform/clock.h"

namespace tern {
namespace {

struct Captured {
  std::vector<std::pair<LogLevel, std::string>> lines;
};

void capture(LogLevel level, const char* message, void* user) {
  static_cast<Captured*>(user)->lines.emplace_back(level, message);
}

TEST(Log, CallbackReceivesFormattedMessagesAtOrAboveLevel) {
  Captured c;
  set_log_callback(&capture, &c);
  set_log_level(LogLevel::Info);
  TERN_LOG_DEBUG("hidden %d", 1);
  TERN_LOG_INFO("loaded %s in %d ms", "model.tern", 42);
  TERN_LOG_ERROR("bad");
  set_log_level(LogLevel::Off);
  TERN_LOG_ERROR("silenced");
  set_log_callback(nullptr, nullptr);
  set_log_level(LogLevel::Warning);
  ASSERT_EQ(c.lines.size(), 2u);
  EXPECT_EQ(c.lines[0].first, LogLevel::Info);
  EXPECT_EQ(c.lines[0].second, "loaded model.tern in 42 ms");
  EXPECT_EQ(c.lines[1].first, LogLevel::Error);
}

TEST(Clock, IsMonotonicAndMeasuresSleep) {
  const uint64_t a = monotonic_ns();
  timespec ts{0, 5 * 1000 * 1000};
  nanosleep(&ts, nullptr);
  const uint64_t b = monotonic_ns();
  EXPECT_GE(b - a, 5u * 1000 * 1000);
  EXPECT_GE(seconds_between(a, b), 0.005);
}

}  // namespace
}  // namespace tern
