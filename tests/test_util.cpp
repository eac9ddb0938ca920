#include "tests/test_util.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

namespace tern::testing {

std::string shared_dir() {
  const char* env = std::getenv("TERN_SHARED_DIR");
  if (env != nullptr && env[0] != '\0') return env;
  return TERN_DEFAULT_SHARED_DIR;
}

std::string shared_path(const std::string& relative) { return shared_dir() + "/" + relative; }

bool shared_file_exists(const std::string& relative) {
  return access(shared_path(relative).c_str(), R_OK) == 0;
}

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && ci[0] != '\0' && std::string(ci) != "0" && std::string(ci) != "false";
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
