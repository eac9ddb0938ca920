// JSON Schema -> GBNF on any text: a schema it accepts must give a grammar that compiles
// (anything else is the converter's bug), whose masks then match brute force.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/structured/grammar.h"
#include "runtime/structured/json_schema.h"
#include "tests/fuzz/fuzz_grammar_vocab.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tern::fuzz::FuzzVocab vocab;
  static const size_t kRegion = size_t{16} << 20;
  static std::unique_ptr<uint8_t[]> region(new uint8_t[kRegion]);
  static std::vector<char> text(size_t{1} << 20);
  size_t n = 0;
  const tern::Error e =
      tern::json_schema_to_grammar(reinterpret_cast<const char*>(data), size, text.data(), text.size(), &n);
  if (e != tern::Error::Ok) return 0;
  tern::Grammar g;
  const tern::Error c = g.compile(text.data(), n, vocab.vocab(), region.get(), kRegion);
  if (c == tern::Error::InvalidGrammar || c == tern::Error::InvalidUtf8) __builtin_trap();
  if (c == tern::Error::Ok) tern::fuzz::walk_and_check(g, vocab, data, size);
  return 0;
}
