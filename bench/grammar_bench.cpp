// tern-grammar-bench BUNDLE --grammar FILE --json-schema FILE ...: decode speed with sampling,
// unconstrained and under each grammar, interleaved round by round on one machine, and the
// ratio constrained / unconstrained per round (mean, spread, range). Each mode has its own
// session slot (each grammar compiled once, its compile time and memory printed); a round
// prefills the same prompt in every session, then times -n tokens of sample() + decode()
// each, in a rotating order. A grammar that completes is started again (its end token is
// decoded like any other), so every mode decodes the same number of tokens.
// --dump DIR writes each grammar's GBNF text (JSON Schemas converted), to give a peer the
// same grammar.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/grammar_bench_table.h"
#include "include/tern.h"
#include "platform/clock.h"
#include "runtime/engine/model.h"
#include "runtime/engine/session.h"
#include "runtime/structured/grammar.h"
#include "runtime/structured/json_schema.h"
#include "tools/common/cli_files.h"

namespace {

struct Mode : tern::bench::ModeResults {
  tern::Session* session = nullptr;
};

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "tern-grammar-bench: %s: %s\n", what, tern::last_error_message());
  std::exit(1);
}

std::string base_name(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

// The command line.
struct GrammarBenchOptions {
  std::string bundle, dump, memory = "16M";
  std::vector<std::string> grammars, schemas;
  unsigned n = 64, rounds = 5, threads = 1, prompt = 32;
};

void add_grammar_bench_options(CLI::App& app, GrammarBenchOptions* o) {
  app.add_option("BUNDLE", o->bundle, ".tern bundle")->required();
  app.add_option("--grammar", o->grammars, "GBNF grammar file (repeatable)");
  app.add_option("--json-schema", o->schemas, "JSON Schema file (repeatable)");
  app.add_option("-n,--tokens", o->n, "tokens per timed run")->check(CLI::PositiveNumber);
  app.add_option("-r,--rounds", o->rounds, "rounds after one warm-up")->check(CLI::PositiveNumber);
  app.add_option("-t,--threads", o->threads, "compute threads");
  app.add_option("-p,--prompt", o->prompt, "prompt tokens (fixed pseudo-random ids)")->check(CLI::PositiveNumber);
  app.add_option("--grammar-memory", o->memory, "grammar memory per session (default 16M)");
  app.add_option("--dump", o->dump, "write each grammar's GBNF text into this directory");
}

// Unconstrained, then one mode per grammar file and per JSON Schema (converted to GBNF);
// false after printing which file could not be read.
bool read_modes(const GrammarBenchOptions& o, std::vector<Mode>* modes_out) {
  std::vector<Mode>& modes = *modes_out;
  modes.resize(1);
  modes[0].name = "unconstrained";
  for (const std::string& path : o.grammars) {
    Mode m;
    m.name = base_name(path);
    if (!tern::cli::read_file(path, &m.grammar)) {
      std::fprintf(stderr, "tern-grammar-bench: cannot read %s\n", path.c_str());
      return false;
    }
    modes.push_back(m);
  }
  for (const std::string& path : o.schemas) {
    Mode m;
    m.name = base_name(path);
    std::string schema;
    if (!tern::cli::read_file(path, &schema)) {
      std::fprintf(stderr, "tern-grammar-bench: cannot read %s\n", path.c_str());
      return false;
    }
    size_t size = 0;
    (void)tern::json_schema_to_grammar(schema.data(), schema.size(), nullptr, 0, &size);
    std::vector<char> text(size + 1);
    if (tern::json_schema_to_grammar(schema.data(), schema.size(), text.data(), text.size(), &size) !=
        tern::Error::Ok) {
      die(path.c_str());
    }
    m.grammar.assign(text.data(), size);
    modes.push_back(m);
  }
  return true;
}

// --dump DIR: each grammar's GBNF text as DIR/NAME.gbnf; false after printing which could not be written.
bool dump_grammars(const std::string& dump, const std::vector<Mode>& modes) {
  for (const Mode& m : modes) {
    if (m.grammar.empty()) continue;
    const std::string path = dump + "/" + m.name + ".gbnf";
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || std::fwrite(m.grammar.data(), 1, m.grammar.size(), f) != m.grammar.size()) {
      std::fprintf(stderr, "tern-grammar-bench: cannot write %s\n", path.c_str());
      return false;
    }
    std::fclose(f);
  }
  return true;
}

// A session per mode, each grammar compiled into its own: the compile table.
void open_sessions(tern::Model& mdl, std::vector<Mode>& modes) {
  std::printf("| grammar | rules | positions | memory used | compile |\n| --- | ---: | ---: | ---: | ---: |\n");
  for (Mode& m : modes) {
    auto session = mdl.create_session(tern::SamplerParams{});
    if (!session.ok()) die("session");
    m.session = *session;
    if (m.grammar.empty()) continue;
    const uint64_t t0 = tern::monotonic_ns();
    if (m.session->set_grammar(m.grammar.data(), m.grammar.size()) != tern::Error::Ok) die(m.name.c_str());
    const double ms = 1e3 * tern::seconds_between(t0, tern::monotonic_ns());
    const tern::Grammar& g = m.session->grammar();
    std::printf("| %s | %u | %u | %.2f MiB | %.0f ms |\n", m.name.c_str(), g.rule_count(), g.position_count(),
                static_cast<double>(g.used_bytes()) / (1024.0 * 1024.0), ms);
  }
  std::printf("\n");
  std::fflush(stdout);
}

// Round 0 warms up; each later round times every mode once, in a rotating order.
void run_rounds(tern::Model& mdl, std::vector<Mode>& modes, const std::vector<int32_t>& ids, unsigned rounds,
                unsigned n) {
  const tern::GrammarVocab& vocab = mdl.grammar_vocab();
  auto is_end = [&](int32_t t) {
    for (uint32_t i = 0; i < vocab.end_token_count(); ++i) {
      if (vocab.end_tokens()[i] == t) return true;
    }
    return false;
  };
  for (unsigned round = 0; round <= rounds; ++round) {  // round 0 warms up
    std::vector<double> rate(modes.size());
    for (size_t k = 0; k < modes.size(); ++k) {
      Mode& m = modes[(k + round) % modes.size()];
      tern::Session& s = *m.session;
      s.reset();
      tern::SamplerParams sp;
      sp.seed = 1000 + round;
      if (s.set_sampler(sp) != tern::Error::Ok) die("sampler");
      if (s.prefill(ids.data(), ids.size()) != tern::Error::Ok) die("prefill");
      double sample_s = 0, decode_s = 0;
      const uint64_t t0 = tern::monotonic_ns();
      for (unsigned i = 0; i < n; ++i) {
        const uint64_t a = tern::monotonic_ns();
        auto token = s.sample();
        if (!token.ok()) die("sample");
        if (!m.grammar.empty() && is_end(*token)) {  // complete: start another sentence
          if (s.set_grammar(m.grammar.data(), m.grammar.size()) != tern::Error::Ok) die("set_grammar");
          ++m.restarts;
        }
        const uint64_t b = tern::monotonic_ns();
        if (s.decode(*token) != tern::Error::Ok) die("decode");
        const uint64_t c = tern::monotonic_ns();
        sample_s += tern::seconds_between(a, b);
        decode_s += tern::seconds_between(b, c);
      }
      const double seconds = tern::seconds_between(t0, tern::monotonic_ns());
      if (round == 0) continue;
      rate[(k + round) % modes.size()] = tern::bench::record_run(m, n, seconds, sample_s, decode_s);
    }
    if (round != 0) tern::bench::add_round(modes, rate);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Decode speed with and without grammar-constrained sampling"};
  GrammarBenchOptions o;
  add_grammar_bench_options(app, &o);
  CLI11_PARSE(app, argc, argv);

  std::vector<Mode> modes;
  if (!read_modes(o, &modes)) return 1;
  if (!o.dump.empty() && !dump_grammars(o.dump, modes)) return 1;

  uint64_t grammar_bytes = 0;
  if (tern_parse_byte_size(o.memory.c_str(), &grammar_bytes) != TERN_OK) die("--grammar-memory");
  tern::ModelParams params;
  params.threads = o.threads;
  params.context_tokens = o.prompt + o.n + 16;
  params.sessions = static_cast<uint32_t>(modes.size());
  params.grammar_bytes = grammar_bytes;
  auto model = tern::Model::load(o.bundle.c_str(), params);
  if (!model.ok()) die("load");
  tern::Model& mdl = **model;
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  std::printf("bundle %s, vocabulary %u tokens, %u thread(s), kernels %s, load average %.2f at start\n\n",
              base_name(o.bundle).c_str(), mdl.config().vocab, o.threads, tern::to_string(tern::active_isa_level()),
              load[0]);
  open_sessions(mdl, modes);

  std::vector<int32_t> ids(o.prompt);
  uint32_t state = 12345;
  for (auto& id : ids) {
    state = state * 1664525u + 1013904223u;
    id = static_cast<int32_t>((state >> 8) % mdl.config().vocab);
  }
  run_rounds(mdl, modes, ids, o.rounds, o.n);
  getloadavg(load, 3);
  tern::bench::print_table(modes, o.rounds, o.n, load[0]);
  for (Mode& m : modes) mdl.destroy_session(m.session);
  return 0;
}
