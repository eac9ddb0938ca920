// The GBNF parser and compiler on any text, then a few steps of the matcher with every mask
// checked against brute force (tests/fuzz/fuzz_grammar_vocab.h).
#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/structured/grammar.h"
#include "tests/fuzz/fuzz_grammar_vocab.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tern::fuzz::FuzzVocab vocab;
  static const size_t kRegion = size_t{8} << 20;
  static std::unique_ptr<uint8_t[]> region(new uint8_t[kRegion]);
  if (!vocab.ok()) __builtin_trap();
  tern::Grammar g;
  if (g.compile(reinterpret_cast<const char*>(data), size, vocab.vocab(), region.get(), kRegion) != tern::Error::Ok) {
    return 0;
  }
  tern::fuzz::walk_and_check(g, vocab, data, size);
  return 0;
}
