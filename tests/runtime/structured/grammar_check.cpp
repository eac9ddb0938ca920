// tern-grammar-check: whether texts are sentences of GBNF grammars, for tests that compare
// Tern's grammar engine with an independent parser. Reads JSON lines
//   {"grammar": "...", "texts": ["...", ...]}
// from stdin and writes one line each:
//   {"ok": true, "accepted": [true, false, ...]}  or  {"ok": false, "status": "INVALID_GRAMMAR", "error": "..."}
// A text is accepted when every byte advances the automaton and it ends where the grammar
// accepts. The vocabulary is the 256 single bytes (and an end token), so only the
// automaton is judged here (the token masks have their own test).
// --schema: each line is {"schema": {...}} and the answer is the converted grammar,
// {"ok": true, "grammar": "..."}, or the refusal.
#include <nlohmann/json.hpp>

#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "include/tern.h"
#include "runtime/structured/grammar.h"
#include "runtime/structured/json_schema.h"
#include "tests/support/byte_vocab.h"

using nlohmann::json;

namespace {

json refusal(tern::Error e) {
  return json{{"ok", false},
              {"status", tern_status_string(static_cast<tern_status>(static_cast<int>(e)))},
              {"error", tern::last_error_message()}};
}

}  // namespace

int main(int argc, char** argv) {
  const bool schema_mode = argc > 1 && std::strcmp(argv[1], "--schema") == 0;
  tern::testing::ByteVocab bytes;
  if (bytes.build() != tern::Error::Ok) {
    std::cerr << "tern-grammar-check: " << tern::last_error_message() << "\n";
    return 1;
  }
  const tern::GrammarVocab& vocab = bytes.vocab();
  const size_t region_bytes = size_t{64} << 20;
  std::unique_ptr<uint8_t[]> region(new uint8_t[region_bytes]);
  std::string line;
  while (std::getline(std::cin, line)) {
    const nlohmann::ordered_json in = nlohmann::ordered_json::parse(line);  // keeps the schema's key order
    if (schema_mode) {
      const std::string schema = in.at("schema").dump();
      size_t size = 0;
      tern::Error e = tern::json_schema_to_grammar(schema.data(), schema.size(), nullptr, 0, &size);
      std::vector<char> text(size + 1);
      if (e == tern::Error::OutOfRange)
        e = tern::json_schema_to_grammar(schema.data(), schema.size(), text.data(), text.size(), &size);
      std::cout << (e == tern::Error::Ok ? json{{"ok", true}, {"grammar", std::string(text.data(), size)}} : refusal(e))
                       .dump()
                << std::endl;
      continue;
    }
    const std::string grammar = in.at("grammar").get<std::string>();
    tern::Grammar g;
    const tern::Error e = g.compile(grammar.data(), grammar.size(), vocab, region.get(), region_bytes);
    if (e != tern::Error::Ok) {
      std::cout << refusal(e).dump() << std::endl;
      continue;
    }
    json accepted = json::array();
    for (const auto& t : in.at("texts")) {
      const std::string text = t.get<std::string>();
      g.restart();
      auto all = g.accept_bytes(reinterpret_cast<const uint8_t*>(text.data()), text.size());
      if (!all.ok()) {
        std::cout << refusal(all.error()).dump() << std::endl;
        return 1;
      }
      accepted.push_back(*all && g.accepting());
    }
    std::cout << json{{"ok", true}, {"accepted", accepted}}.dump() << std::endl;
  }
  return 0;
}
