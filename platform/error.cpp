#include "platform/error.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace tern {
namespace {

constexpr size_t kMessageCapacity = 512;
thread_local char t_message[kMessageCapacity];
thread_local Error t_code = Error::Ok;

}  // namespace

const char* to_string(Error e) {
  switch (e) {
#define TERN_X(name, cname, value, msg) \
  case Error::name: return #name;
    TERN_ERROR_LIST(TERN_X)
#undef TERN_X
  }
  return "Unknown";
}

const char* default_message(Error e) {
  switch (e) {
#define TERN_X(name, cname, value, msg) \
  case Error::name: return msg;
    TERN_ERROR_LIST(TERN_X)
#undef TERN_X
  }
  return "unknown error code";
}

bool is_known_error_code(int32_t value) {
  switch (value) {
#define TERN_X(name, cname, v, msg) case v:
    TERN_ERROR_LIST(TERN_X)
#undef TERN_X
    return true;
    default: return false;
  }
}

Error fail(Error e, const char* fmt, ...) {
  t_code = e;
  va_list args;
  va_start(args, fmt);
  const int n = std::vsnprintf(t_message, kMessageCapacity, fmt, args);
  va_end(args);
  if (n < 0) std::snprintf(t_message, kMessageCapacity, "%s", default_message(e));
  return e;
}

const char* last_error_message() { return t_message; }
Error last_error_code() { return t_code; }
void clear_last_error() {
  t_code = Error::Ok;
  t_message[0] = '\0';
}

}  // namespace tern
