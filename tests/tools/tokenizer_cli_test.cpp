// tern-tokenize end to end: JSON lines in, ids out, for a tokenizer file and for a .tern
// bundle made by tern-convert, checked against the shared reference ids.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/test_util.h"

namespace tern {
namespace {

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

// Runs tern-tokenize on `cases` and returns the ids it printed, one vector per line.
std::vector<std::vector<int32_t>> run_cli(const std::string& tokenizer, const std::vector<Case>& cases) {
  testing::TempFile input(".jsonl");
  std::string lines;
  for (const auto& c : cases) lines += nlohmann::json{{"text", c.text}}.dump() + "\n";
  input.write(lines.data(), lines.size());
  const std::string command = std::string(TERN_TOKENIZE_PATH) + " '" + tokenizer + "' < '" + input.path() + "'";
  FILE* pipe = ::popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr);
  std::vector<std::vector<int32_t>> out;
  if (pipe == nullptr) return out;
  std::string line;
  for (int ch; (ch = std::fgetc(pipe)) != EOF;) {
    if (ch != '\n') {
      line += static_cast<char>(ch);
      continue;
    }
    auto j = nlohmann::json::parse(line);
    out.push_back(j["ids"].get<std::vector<int32_t>>());
    line.clear();
  }
  EXPECT_EQ(::pclose(pipe), 0) << command;
  return out;
}

TEST(TernTokenizeCli, Llama3SamplesFromTokenizerJson) {
  TERN_REQUIRE_FILE(testing::llama3_tokenizer_json());
  TERN_REQUIRE_FILE(testing::llama3_samples());
  std::vector<Case> cases;
  std::ifstream in(testing::llama3_samples());
  std::string line;
  while (std::getline(in, line) && cases.size() < 100) {
    auto j = nlohmann::json::parse(line);
    cases.push_back({j["text"].get<std::string>(), j["ids"].get<std::vector<int32_t>>()});
  }
  const auto got = run_cli(testing::llama3_tokenizer_json(), cases);
  ASSERT_EQ(got.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(got[i], cases[i].ids) << i;
}

TEST(TernTokenizeCli, TinyAustenBundle) {
  TERN_REQUIRE_FILE(testing::tiny_austen_reference_logits());
  testing::TempFile bundle(".tern");
  const std::string convert = std::string(TERN_CONVERT_PATH) + " -q '" + testing::tiny_austen_packed_dir() + "' -o '" +
                              bundle.path() + "' > /dev/null";
  ASSERT_EQ(std::system(convert.c_str()), 0) << convert;
  std::ifstream in(testing::tiny_austen_reference_logits());
  auto j = nlohmann::json::parse(in);
  std::vector<Case> cases;
  for (const auto& c : j["cases"]) {
    auto ids = c["ids"].get<std::vector<int32_t>>();
    ids.erase(ids.begin());  // the reference starts with BOS; the CLI writes none
    cases.push_back({c["text"].get<std::string>(), ids});
  }
  const auto got = run_cli(bundle.path(), cases);
  ASSERT_EQ(got.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(got[i], cases[i].ids) << cases[i].text;
}

}  // namespace
}  // namespace tern
