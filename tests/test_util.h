// Helpers shared by the test suites: where the shared assets live, temp files.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "platform/error.h"

namespace tern::testing {

// Root of ../shared: $TERN_SHARED_DIR if set, else the path configured at build time.
std::string shared_dir();
// shared_dir() + "/" + relative.
std::string shared_path(const std::string& relative);
bool shared_file_exists(const std::string& relative);
// True when running under CI (env CI set), where missing shared assets are a failure.
bool in_ci();

std::vector<uint8_t> read_file_bytes(const std::string& path);
std::string read_file_text(const std::string& path);
// n ternary codes (-1, 0, 1), uniformly random from `seed` (the same on every platform).
std::vector<int8_t> random_ternary_codes(size_t n, uint32_t seed);
// `r` failed with `code`, and the error message holds each of `parts` (the file it names,
// the words that say why).
template <class T>
void expect_failure(const Result<T>& r, Error code, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), code) << last_error_message();
  const std::string msg = last_error_message();
  for (const std::string& part : parts) EXPECT_NE(msg.find(part), std::string::npos) << msg;
}

// A fresh path under the system temp directory; the file is removed when the object dies.
class TempFile {
 public:
  explicit TempFile(const std::string& suffix = "");
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }
  void write(const void* data, size_t size) const;
  void write(const std::vector<uint8_t>& bytes) const { write(bytes.data(), bytes.size()); }

 private:
  std::string path_;
};

// A fresh directory under the system temp directory, removed with its files when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace tern::testing

// Skips the test when `present` is false, or fails it under CI, where every asset must be
// there. The messages are streamed: "text" << value.
#define TERN_REQUIRE_ASSET(present, ci_failure, local_skip) \
  do {                                                      \
    if (!(present)) {                                       \
      if (::tern::testing::in_ci()) {                       \
        FAIL() << ci_failure;                               \
      } else {                                              \
        GTEST_SKIP() << local_skip;                         \
      }                                                     \
    }                                                       \
  } while (0)

// Skips the test (fails it under CI) when a shared asset is missing.
#define TERN_REQUIRE_SHARED(relative)                                                          \
  TERN_REQUIRE_ASSET(::tern::testing::shared_file_exists(relative),                            \
                     "shared asset missing in CI: " << ::tern::testing::shared_path(relative), \
                     "shared asset not present (skipping): " << ::tern::testing::shared_path(relative))
