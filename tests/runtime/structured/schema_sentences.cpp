// tern-schema-sentences [--per-schema N] [--seed S] [--max-bytes L]: random sentences of the
// grammar of every schema of the JSON-Schema-Test-Suite (tests/data/json-schema-test-suite)
// the converter accepts, for json_schema_sentences_test.py to validate with python3-jsonschema.
//
// Each sentence is a walk through the token masks over the byte vocabulary: at each step one
// allowed byte, drawn with a seeded RNG (closing bytes favoured, white space not, so walks end),
// until the end token is drawn; walks past L bytes are dropped. One JSON line per schema:
//   {"draft": "draft7", "keyword": "enum", "group": 3, "schema": {...}, "sentences": ["...", ...]}
// Exits 1 if a byte the mask allowed is then refused by the automaton.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/support/byte_vocab.h"
#include "tests/support/json_suite.h"

namespace {

using tern::testing::ByteVocab;

// A byte's weight in the draw: closing a string, array or object ends a walk; white space
// and a value's continuation do not.
double weight(uint32_t b) {
  if (b == ByteVocab::kEndToken) return 6;
  if (b == '"' || b == ']' || b == '}') return 6;
  if (b == ' ' || b == '\n' || b == '\t' || b == '\r') return 0.1;
  return 1;
}

// One sentence, or false when the walk passed max_bytes.
bool walk(tern::Grammar& grammar, std::mt19937_64& rng, size_t max_bytes, std::string* out, bool* broken) {
  std::vector<uint32_t> words(grammar.mask_words());
  std::vector<uint32_t> allowed;
  std::vector<double> weights;
  out->clear();
  grammar.restart();
  while (out->size() <= max_bytes) {
    if (!grammar.compute_mask(grammar.state(), words.data()).ok()) return false;
    allowed.clear();
    weights.clear();
    for (uint32_t t = 0; t <= ByteVocab::kEndToken; ++t) {
      if ((words[t / 32] >> (t % 32)) & 1) allowed.push_back(t), weights.push_back(weight(t));
    }
    if (allowed.empty()) {
      *broken = true;  // a state with nothing to write and no end
      return false;
    }
    const uint32_t t = allowed[std::discrete_distribution<size_t>(weights.begin(), weights.end())(rng)];
    if (t == ByteVocab::kEndToken) return true;
    const auto b = static_cast<uint8_t>(t);
    auto stepped = grammar.accept_bytes(&b, 1);
    if (!stepped.ok() || !*stepped) {
      *broken = true;
      return false;
    }
    out->push_back(static_cast<char>(b));
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  int per_schema = 8;
  uint64_t seed = 1;
  size_t max_bytes = 400;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--per-schema") == 0) {
      per_schema = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--seed") == 0) {
      seed = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (std::strcmp(argv[i], "--max-bytes") == 0) {
      max_bytes = std::strtoul(argv[i + 1], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: tern-schema-sentences [--per-schema N] [--seed S] [--max-bytes L]\n");
      return 2;
    }
  }
  ByteVocab vocab;
  if (vocab.build() != tern::Error::Ok) return 1;
  tern::testing::suite::SchemaGrammar g;
  std::mt19937_64 rng(seed);
  bool broken = false;
  for (const char* draft : tern::testing::suite::kDrafts) {
    int index = 0;
    for (const auto& group : tern::testing::suite::read_draft(draft)) {
      const std::string schema = tern::testing::suite::compact(group.schema);
      if (g.build(schema, vocab.vocab()) != tern::Error::Ok) {
        ++index;
        continue;
      }
      std::string line = "{\"draft\":\"" + std::string(draft) +
                         "\",\"keyword\":" + nlohmann::json(group.keyword).dump() +
                         ",\"group\":" + std::to_string(index++) + ",\"schema\":" + schema + ",\"sentences\":[";
      std::string sentence;
      int kept = 0;
      for (int attempt = 0; attempt < 4 * per_schema && kept < per_schema; ++attempt) {
        if (!walk(g.grammar(), rng, max_bytes, &sentence, &broken)) continue;
        line += (kept++ > 0 ? "," : "") + nlohmann::json(sentence).dump();
      }
      std::printf("%s]}\n", line.c_str());
      if (broken) {
        std::fprintf(stderr, "tern-schema-sentences: the mask and the automaton disagree on %s\n", schema.c_str());
        return 1;
      }
    }
  }
  return 0;
}
