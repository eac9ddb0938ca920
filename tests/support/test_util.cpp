#include "tests/support/test_util.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

namespace tern::testing {

std::string repo_path(const std::string& relative) { return std::string(TERN_SOURCE_DIR) + "/" + relative; }

std::string npm_path(const std::string& relative) {
  const char* env = std::getenv("TERN_NPM_DIR");
  const std::string prefix = env != nullptr && env[0] != '\0' ? env : TERN_DEFAULT_NPM_DIR;
  return prefix + "/node_modules/" + relative;
}

std::string shared_dir() {
  const char* env = std::getenv("TERN_SHARED_DIR");
  if (env != nullptr && env[0] != '\0') return env;
  return TERN_DEFAULT_SHARED_DIR;
}

std::string shared_path(const std::string& relative) { return shared_dir() + "/" + relative; }

bool file_exists(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

namespace {
TestPart g_part = TestPart::All;
bool g_case_read_shared = false;
std::vector<std::string> g_missing;
}  // namespace

const std::vector<std::string>& shared_files_missing() { return g_missing; }

void set_test_part(TestPart part) { g_part = part; }
TestPart test_part() { return g_part; }
void begin_case() { g_case_read_shared = false; }
bool case_read_shared() { return g_case_read_shared; }

SharedCheck require_shared(const std::string& relative, std::string* why) {
  g_case_read_shared = true;
  if (g_part == TestPart::Own) {
    *why = "reads ../shared/" + relative +
           " but runs in the self-contained entry: add the case to its binary's "
           "THIRD_PARTY filter (tern_add_test), or give it files from the repository";
    return SharedCheck::Fail;
  }
  if (file_exists(shared_path(relative))) return SharedCheck::Run;
  // No ../shared at all: a new user's clone. A ../shared without the file is a broken checkout.
  if (!file_exists(shared_dir())) {
    if (std::find(g_missing.begin(), g_missing.end(), relative) == g_missing.end()) g_missing.push_back(relative);
    *why = "needs ../shared: " + relative;
    return SharedCheck::Skip;
  }
  *why = "missing from " + shared_dir() + ": " + relative;
  return SharedCheck::Fail;
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string read_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<int8_t> random_ternary_codes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-1, 1);
  std::vector<int8_t> codes(n);
  for (auto& c : codes) c = static_cast<int8_t>(dist(rng));
  return codes;
}

TempFile::TempFile(const std::string& suffix) {
  static std::atomic<int> counter{0};
  const char* dir = std::getenv("TMPDIR");
  path_ = std::string(dir != nullptr ? dir : "/tmp") + "/tern-test-" + std::to_string(getpid()) + "-" +
          std::to_string(counter++) + suffix;
}

TempFile::~TempFile() { std::remove(path_.c_str()); }

void TempFile::write(const void* data, size_t size) const {
  std::FILE* f = std::fopen(path_.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path_;
  if (size > 0) ASSERT_EQ(std::fwrite(data, 1, size, f), size);
  std::fclose(f);
}

}  // namespace tern::testing

namespace tern::testing {

TempDir::TempDir() {
  const char* dir = std::getenv("TMPDIR");
  std::string pattern = std::string(dir != nullptr ? dir : "/tmp") + "/tern-test-XXXXXX";
  if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

}  // namespace tern::testing
