// Errors are values: every fallible function returns `Error` or `Result<T>`.
// A failure may carry a message, written to a thread-local buffer (no heap) and
// read back by the C API as the last-error message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

#include "include/tern_error_codes.h"

namespace tern {

// [[nodiscard]]: an Error dropped on the floor does not compile; where ignoring one is right,
// the call site says so with a (void) cast and a comment.
enum class [[nodiscard]] Error : int32_t{
#define TERN_X(name, cname, value, msg) name = value,
    TERN_ERROR_LIST(TERN_X)
#undef TERN_X
};

// Stable name of the code, e.g. "InvalidBundle"; "Unknown" for values outside the list.
const char* to_string(Error e);
// Default human message for the code.
const char* default_message(Error e);
// True when `value` is one of the listed codes.
bool is_known_error_code(int32_t value);

// Records `e` with a printf-style message in the calling thread's last-error slot and
// returns `e`, so call sites read `return fail(Error::Truncated, "...", ...)`.
Error fail(Error e, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// The last message recorded on this thread by `fail` (empty string if none).
const char* last_error_message();
Error last_error_code();
void clear_last_error();

// Holds either a T or an Error (never Ok). Move-only when T is.
template <typename T>
class [[nodiscard]] Result {
  static_assert(!std::is_reference<T>::value, "Result<T&> is not supported");

 public:
  Result(T&& value) : ok_(true) { new (&storage_) T(std::move(value)); }                     // NOLINT
  Result(const T& value) : ok_(true) { new (&storage_) T(value); }                           // NOLINT
  Result(Error error) : ok_(false), error_(error == Error::Ok ? Error::Internal : error) {}  // NOLINT
  Result(Result&& other) noexcept : ok_(other.ok_), error_(other.error_) {
    if (ok_) new (&storage_) T(std::move(*other.ptr()));
  }
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  Result& operator=(Result&& other) noexcept {
    if (this != &other) {
      destroy();
      ok_ = other.ok_;
      error_ = other.error_;
      if (ok_) new (&storage_) T(std::move(*other.ptr()));
    }
    return *this;
  }
  ~Result() { destroy(); }

  bool ok() const { return ok_; }
  Error error() const { return ok_ ? Error::Ok : error_; }

  // Precondition: ok(). Checked by callers through the macros below.
  T& value() & { return *ptr(); }
  const T& value() const& { return *ptr(); }
  T&& value() && { return std::move(*ptr()); }
  T* operator->() { return ptr(); }
  const T* operator->() const { return ptr(); }
  T& operator*() & { return *ptr(); }
  const T& operator*() const& { return *ptr(); }

 private:
  T* ptr() { return reinterpret_cast<T*>(&storage_); }
  const T* ptr() const { return reinterpret_cast<const T*>(&storage_); }
  void destroy() {
    if (ok_) ptr()->~T();
    ok_ = false;
  }

  bool ok_;
  Error error_ = Error::Ok;
  typename std::aligned_storage<sizeof(T), alignof(T)>::type storage_;
};

}  // namespace tern

#define TERN_CONCAT_INNER_(a, b) a##b
#define TERN_CONCAT_(a, b) TERN_CONCAT_INNER_(a, b)

// Returns the error of an `Error`-valued expression if it is not Ok.
#define TERN_RETURN_IF_ERROR(expr)                        \
  do {                                                    \
    const ::tern::Error tern_err_ = (expr);               \
    if (tern_err_ != ::tern::Error::Ok) return tern_err_; \
  } while (0)

// Declares `lhs` from a Result-valued expression, or returns its error.
//   TERN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
#define TERN_ASSIGN_OR_RETURN(lhs, expr) TERN_ASSIGN_OR_RETURN_IMPL_(TERN_CONCAT_(tern_result_, __LINE__), lhs, expr)
#define TERN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.error();                \
  lhs = std::move(tmp).value()

// Returns `fail(code, fmt, ...)` when `cond` is false.
#define TERN_CHECK_OR_RETURN(cond, code, ...)              \
  do {                                                     \
    if (!(cond)) return ::tern::fail((code), __VA_ARGS__); \
  } while (0)
