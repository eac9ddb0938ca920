// --grammar FILE / --json-schema FILE, as tern-run and tern-bench take them: the GBNF text
// the session is given (a schema is turned into one with tern_json_schema_to_grammar).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "include/tern.h"
#include "tools/common/cli_files.h"

namespace tern::cli {

struct GrammarOptions {
  std::string grammar_file, schema_file, memory = "auto";
};

inline void add_grammar_options(CLI::App& app, GrammarOptions* o) {
  app.add_option("--grammar", o->grammar_file, "constrain the output to a GBNF grammar (file; root rule 'root')");
  app.add_option("--json-schema", o->schema_file, "constrain the output to JSON valid against a JSON Schema (file)")
      ->excludes(app.get_option("--grammar"));
  app.add_option("--grammar-memory", o->memory,
                 "memory per session for the compiled grammar (default auto: 2M + 48 bytes per token of the "
                 "vocabulary, the C API's default; 0: none)");
}

// The grammar text (empty without --grammar / --json-schema); false with a message on stderr.
inline bool grammar_text(const GrammarOptions& o, const char* program, std::string* out) {
  out->clear();
  const std::string& path = o.grammar_file.empty() ? o.schema_file : o.grammar_file;
  if (path.empty()) return true;
  std::string text, why;
  if (!read_file(path, &text, &why)) {
    std::fprintf(stderr, "%s: cannot read %s\n", program, why.c_str());
    return false;
  }
  if (!o.grammar_file.empty()) {
    *out = text;
    return true;
  }
  size_t size = 0;
  tern_status s = tern_json_schema_to_grammar(text.data(), text.size(), nullptr, 0, &size);
  if (s == TERN_OUT_OF_RANGE) {
    std::vector<char> buf(size + 1);
    s = tern_json_schema_to_grammar(text.data(), text.size(), buf.data(), buf.size(), &size);
    out->assign(buf.data(), size);
  }
  if (s != TERN_OK) {
    std::fprintf(stderr, "%s: --json-schema %s: %s (%s)\n", program, path.c_str(), tern_last_error_message(),
                 tern_status_string(s));
    return false;
  }
  return true;
}

// The bytes to reserve per session: TERN_GRAMMAR_BYTES_AUTO for "auto", with a grammar or
// without (a CLI loads as the C API's defaults would).
inline bool grammar_memory(const GrammarOptions& o, const char* program, uint64_t* out) {
  *out = TERN_GRAMMAR_BYTES_AUTO;
  if (o.memory == "auto") return true;
  if (tern_parse_byte_size(o.memory.c_str(), out) != TERN_OK) {
    std::fprintf(stderr, "%s: --grammar-memory '%s': %s\n", program, o.memory.c_str(), tern_last_error_message());
    return false;
  }
  return true;
}

}  // namespace tern::cli
