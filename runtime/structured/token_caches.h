// Per-position token caches: for each terminal position, the tokens of the sorted vocabulary
// (GrammarVocab) its rule accepts whole, and those to check against the real stack.
#pragma once

#include <cstddef>

#include "platform/error.h"
#include "runtime/structured/grammar.h"
#include "runtime/structured/grammar_program.h"
#include "runtime/structured/region.h"

namespace tern::grammar_detail {

// For every terminal position: the tokens its rule accepts whole from there, and the ranges
// of tokens that leave the rule with bytes that may follow it (uncertain). Written into the
// region's low end; `needed` gets the bytes they take (also when they do not fit).
// Aborted as soon as `abort` (may be null) is non-zero.
Error build_caches(Grammar::Program& g, const GrammarVocab& v, Region& region, size_t* needed,
                   const std::atomic<int>* abort);

}  // namespace tern::grammar_detail
