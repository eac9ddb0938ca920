#include "platform/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tern {
namespace {

std::atomic<LogCallback> g_callback{nullptr};
std::atomic<void*> g_user_data{nullptr};
std::atomic<int> g_level{-1};  // -1: not yet read from the environment

LogLevel level_from_env() {
  const char* v = std::getenv("TERN_LOG_LEVEL");
  if (v == nullptr) return LogLevel::Warning;
  if (std::strcmp(v, "debug") == 0) return LogLevel::Debug;
  if (std::strcmp(v, "info") == 0) return LogLevel::Info;
  if (std::strcmp(v, "error") == 0) return LogLevel::Error;
  if (std::strcmp(v, "off") == 0) return LogLevel::Off;
  return LogLevel::Warning;
}

}  // namespace

void set_log_callback(LogCallback callback, void* user_data) {
  g_user_data.store(user_data);
  g_callback.store(callback);
}

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }

LogLevel log_level() {
  int v = g_level.load();
  if (v < 0) {
    v = static_cast<int>(level_from_env());
    g_level.store(v);
  }
  return static_cast<LogLevel>(v);
}

const char* to_string(LogLevel level) {
  switch (level) {
    case LogLevel::Debug: return "debug";
    case LogLevel::Info: return "info";
    case LogLevel::Warning: return "warning";
    case LogLevel::Error: return "error";
    case LogLevel::Off: return "off";
  }
  return "?";
}

void log(LogLevel level, const char* fmt, ...) {
  if (level < log_level() || level == LogLevel::Off) return;
  char buf[1024];  // on the stack: logging must not allocate
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  LogCallback cb = g_callback.load();
  if (cb != nullptr) {
    cb(level, buf, g_user_data.load());
  } else {
    std::fprintf(stderr, "tern %s: %s\n", to_string(level), buf);
  }
}

}  // namespace tern
