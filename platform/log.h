// Logging goes through one sink: stderr by default, or the app's callback
// (an Android app routes it to logcat, an iOS app to os_log).
#pragma once

namespace tern {

enum class LogLevel : int { Debug = 0, Info = 1, Warning = 2, Error = 3, Off = 4 };

using LogCallback = void (*)(LogLevel level, const char* message, void* user_data);

// Replaces the sink; nullptr restores stderr. Not thread-safe against concurrent logging:
// set it once at startup.
void set_log_callback(LogCallback callback, void* user_data);
// Messages below this level are dropped before formatting. Default: Warning, or the
// value of TERN_LOG_LEVEL (debug|info|warning|error|off) read at first use.
void set_log_level(LogLevel level);
LogLevel log_level();

void log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
const char* to_string(LogLevel level);

}  // namespace tern

#define TERN_LOG_DEBUG(...) ::tern::log(::tern::LogLevel::Debug, __VA_ARGS__)
#define TERN_LOG_INFO(...) ::tern::log(::tern::LogLevel::Info, __VA_ARGS__)
#define TERN_LOG_WARNING(...) ::tern::log(::tern::LogLevel::Warning, __VA_ARGS__)
#define TERN_LOG_ERROR(...) ::tern::log(::tern::LogLevel::Error, __VA_ARGS__)
