// The Qwen3 (byte-level BPE, Qwen2 split, NFC) and Gemma3 (SentencePiece-style BPE with
// merges and byte fallback) tokenizers of the embedding bundles against the independent
// Hugging Face tokenizers implementation (npm @huggingface/tokenizers, run by the
// embedding_make_models fixture): ids equal on every text of the LLaMA-3 held-out sample
// and the multilingual / emoji / whitespace / number / code / NFD cases, 428 each.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/engine/model.h"
#include "runtime/text/unicode.h"
#include "tests/support/test_util.h"

namespace tern {
namespace {

std::string embedding_dir() {
  const char* env = std::getenv("TERN_EMBEDDING_TEST_DIR");
  return env != nullptr && *env != '\0' ? env : TERN_EMBEDDING_TEST_DIR_DEFAULT;
}

class OracleTokenizer : public ::testing::TestWithParam<std::string> {};

TEST_P(OracleTokenizer, IdsEqualHuggingFace) {
  const std::string ids_path = embedding_dir() + "/tokenizer-ids.jsonl";
  ASSERT_TRUE(testing::file_exists(ids_path)) << ids_path << " is missing (ctest makes it in embedding_make_models)";
  ModelParams params;
  params.context_tokens = 64;
  auto model = Model::load((embedding_dir() + "/" + GetParam() + ".tern").c_str(), params);
  ASSERT_TRUE(model.ok()) << last_error_message();
  Tokenizer* tok = (*model)->tokenizer();
  std::ifstream in(ids_path);
  std::string line;
  size_t cases = 0, decoded = 0;
  std::vector<int32_t> ids;
  std::vector<char> text_out;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["model"] != GetParam()) continue;
    const std::string text = j["text"];
    const std::vector<int32_t> want = j["ids"].get<std::vector<int32_t>>();
    ids.assign(4 * text.size() + 8, 0);
    auto n = tok->encode(text.data(), text.size(), false, true, ids.data(), ids.size());
    ASSERT_TRUE(n.ok()) << last_error_message();
    ids.resize(*n);
    EXPECT_EQ(ids, want) << GetParam() << ": " << text;
    ++cases;
    // Decoding gives the text back (for Qwen, texts NFC leaves alone; Gemma decodes a
    // literal U+2581 as the space it stands for, as Hugging Face's decoder does).
    if (!unicode::nfc_quick_check(reinterpret_cast<const uint8_t*>(text.data()), text.size())) continue;
    if (GetParam() == "gemma3" && text.find("\xE2\x96\x81") != std::string::npos) continue;
    TokenDecoder decoder(*tok);
    std::string back;
    text_out.resize(4096);
    for (int32_t id : want) {
      auto w = decoder.push(id, text_out.data(), text_out.size());
      ASSERT_TRUE(w.ok());
      back.append(text_out.data(), *w);
    }
    auto w = decoder.flush(text_out.data(), text_out.size());
    ASSERT_TRUE(w.ok());
    back.append(text_out.data(), *w);
    if (back.find("<|endoftext|>") == std::string::npos && back.find("<bos>") == std::string::npos) {
      EXPECT_EQ(back, text);
      ++decoded;
    }
  }
  EXPECT_GE(cases, 300u);
  std::printf("%s: %zu texts equal to the oracle, %zu decoded back\n", GetParam().c_str(), cases, decoded);
}

INSTANTIATE_TEST_SUITE_P(Models, OracleTokenizer, ::testing::Values("qwen3", "gemma3"));

// NFC against the UCD's own conformance file (NormalizationTest.txt: c2 == NFC(c1..c5)).
TEST(Nfc, UnicodeConformance) {
  const std::string path = TERN_NORMALIZATION_TEST;
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path << " is missing (Debian unicode-data; the build decompresses it)";
  std::string line;
  size_t checked = 0;
  auto parse = [](const std::string& field) {
    std::string out;
    size_t pos = 0;
    while (pos < field.size()) {
      while (pos < field.size() && field[pos] == ' ') ++pos;
      if (pos >= field.size()) break;
      size_t end = field.find(' ', pos);
      if (end == std::string::npos) end = field.size();
      uint8_t buf[4];
      const size_t n =
          unicode::encode_utf8(static_cast<uint32_t>(std::stoul(field.substr(pos, end - pos), nullptr, 16)), buf);
      out.append(reinterpret_cast<char*>(buf), n);
      pos = end;
    }
    return out;
  };
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line[0] == '@') continue;
    std::vector<std::string> cols;
    size_t start = 0;
    for (int k = 0; k < 5; ++k) {
      const size_t semi = line.find(';', start);
      cols.push_back(parse(line.substr(start, semi - start)));
      start = semi + 1;
    }
    for (int k : {0, 1, 2}) {  // NFC(c1) == NFC(c2) == NFC(c3) == c2
      const std::string& src = cols[k];
      std::vector<uint32_t> work(unicode::nfc_work_bytes(src.size()) / 4);
      std::string out(unicode::nfc_output_bytes(src.size()), '\0');
      const size_t n = unicode::nfc(reinterpret_cast<const uint8_t*>(src.data()), src.size(), work.data(),
                                    reinterpret_cast<uint8_t*>(&out[0]));
      out.resize(n);
      ASSERT_EQ(out, cols[1]) << line;
      if (unicode::nfc_quick_check(reinterpret_cast<const uint8_t*>(src.data()), src.size())) {
        ASSERT_EQ(src, cols[1]) << "quick check passed a text NFC changes: " << line;
      }
    }
    ++checked;
  }
  EXPECT_GT(checked, 15000u);
}

}  // namespace
}  // namespace tern
