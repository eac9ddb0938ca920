// tern-grammar-compile-bench BUNDLE --json-schema FILE --grammar FILE ...: what a grammar costs
// before and during generation, without running the model: the bundle gives only its
// tokenizer (the vocabulary grammars walk and the instance's token ids). For each grammar:
//   compile  Grammar::compile of its GBNF text (JSON Schemas converted first, not timed), -r
//            times, each into a fresh region (zeroed before the clock starts, so page faults
//            are not counted); the median and range of wall time, the median thread CPU time,
//            and the region bytes the compiled grammar uses;
//   mask     the instance beside the grammar (X.json -> X.instance.json, X.gbnf ->
//            X.instance.json) tokenized with the bundle's tokenizer (no BOS, no special
//            tokens), then walked -r times from the start: before each token the mask is
//            computed over a logits array (Grammar::mask_logits, timed), the token must be
//            allowed, and it is accepted (not timed); after the last token the mask is timed
//            once more and must allow an end token. Median and p99 over every timed mask.
// A token the grammar does not allow is an error (exit 1): it means the instance, the
// converter or the engine is wrong, and no time is printed for it.
// --raw FILE appends the measurements one line per item for bench/grammar_compile_peers.sh;
// --dump DIR writes each grammar's GBNF text (the text the llama.cpp peer compiles), and with
// --dump-only does nothing else.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "include/tern.h"
#include "platform/clock.h"
#include "runtime/engine/model.h"
#include "runtime/structured/grammar.h"
#include "runtime/structured/json_schema.h"
#include "tools/common/cli_files.h"

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "tern-grammar-compile-bench: %s: %s\n", what.c_str(), tern::last_error_message());
  std::exit(1);
}

std::string base_name(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

// "dir/x.json" -> "dir/x.instance.json" (likewise for .gbnf).
std::string instance_path(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  const std::string stem =
      dot != std::string::npos && (slash == std::string::npos || dot > slash) ? path.substr(0, dot) : path;
  return stem + ".instance.json";
}

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return 1e3 * static_cast<double>(ts.tv_sec) + 1e-6 * static_cast<double>(ts.tv_nsec);
}

// The q-quantile of `v` (nearest rank); v is sorted in place.
double quantile(std::vector<double>& v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[rank == 0 ? 0 : rank - 1];
}

struct Options {
  std::string bundle, dump, raw, memory = "64M";
  std::vector<std::string> grammars, schemas;
  unsigned rounds = 5;
  bool dump_only = false;
};

struct Case {
  std::string name, instance_file, gbnf, instance;
  std::vector<int32_t> tokens;
  std::vector<double> compile_ms, compile_cpu_ms, mask_ms;
  std::vector<uint32_t> allowed;  // per step of the last walk
  size_t used_bytes = 0;
};

void read_cases(const Options& o, std::vector<Case>* cases) {
  for (const std::string& path : o.grammars) {
    Case c;
    c.name = base_name(path);
    if (!tern::cli::read_file(path, &c.gbnf)) die("cannot read " + path);
    c.instance_file = instance_path(path);
    cases->push_back(c);
  }
  for (const std::string& path : o.schemas) {
    Case c;
    c.name = base_name(path);
    std::string schema;
    if (!tern::cli::read_file(path, &schema)) die("cannot read " + path);
    size_t size = 0;
    (void)tern::json_schema_to_grammar(schema.data(), schema.size(), nullptr, 0, &size);
    std::vector<char> text(size + 1);
    if (tern::json_schema_to_grammar(schema.data(), schema.size(), text.data(), text.size(), &size) !=
        tern::Error::Ok) {
      die(path);
    }
    c.gbnf.assign(text.data(), size);
    c.instance_file = instance_path(path);
    cases->push_back(c);
  }
  for (Case& c : *cases) {
    if (!tern::cli::read_file(c.instance_file, &c.instance)) die("cannot read the instance " + c.instance_file);
    while (!c.instance.empty() && std::strchr(" \t\r\n", c.instance.back()) != nullptr) c.instance.pop_back();
  }
}

bool dump_grammars(const std::string& dir, const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    const std::string path = dir + "/" + c.name + ".gbnf";
    std::FILE* f = std::fopen(path.c_str(), "wb");
    const bool ok = f != nullptr && std::fwrite(c.gbnf.data(), 1, c.gbnf.size(), f) == c.gbnf.size();
    if (f != nullptr) std::fclose(f);
    if (!ok) {
      std::fprintf(stderr, "tern-grammar-compile-bench: cannot write %s\n", path.c_str());
      return false;
    }
  }
  return true;
}

void tokenize(tern::Model& mdl, Case& c) {
  c.tokens.resize(c.instance.size() + 16);
  size_t needed = 0;
  auto n = mdl.encode(c.instance.data(), c.instance.size(), /*add_bos=*/false, /*parse_special=*/false, c.tokens.data(),
                      c.tokens.size(), &needed);
  if (!n.ok()) die("tokenize " + c.instance_file);
  c.tokens.resize(*n);
}

// One compile into a freshly zeroed region.
void compile_once(const tern::GrammarVocab& vocab, Case& c, tern::Grammar& g, std::vector<std::max_align_t>& region) {
  std::memset(region.data(), 0, region.size() * sizeof(std::max_align_t));
  g.clear();
  const double cpu0 = thread_cpu_ms();
  const uint64_t t0 = tern::monotonic_ns();
  if (g.compile(c.gbnf.data(), c.gbnf.size(), vocab, region.data(), region.size() * sizeof(std::max_align_t)) !=
      tern::Error::Ok) {
    die("compile " + c.name);
  }
  c.compile_ms.push_back(1e3 * tern::seconds_between(t0, tern::monotonic_ns()));
  c.compile_cpu_ms.push_back(thread_cpu_ms() - cpu0);
  c.used_bytes = g.used_bytes();
}

// One walk of the instance's tokens, timing each mask; exits on a token the grammar refuses.
void walk_once(const tern::GrammarVocab& vocab, Case& c, tern::Grammar& g, std::vector<float>& logits) {
  g.restart();
  c.allowed.clear();
  for (size_t i = 0; i <= c.tokens.size(); ++i) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    const uint64_t t0 = tern::monotonic_ns();
    auto allowed = g.mask_logits(g.state(), logits.data());
    const uint64_t t1 = tern::monotonic_ns();
    if (!allowed.ok()) die("mask " + c.name);
    c.mask_ms.push_back(1e3 * tern::seconds_between(t0, t1));
    c.allowed.push_back(*allowed);
    if (i == c.tokens.size()) break;
    const int32_t token = c.tokens[i];
    if (!std::isfinite(logits[static_cast<size_t>(token)])) {
      std::fprintf(stderr, "tern-grammar-compile-bench: %s: token %zu (id %d) of %s is not allowed (%u are)\n",
                   c.name.c_str(), i, token, c.instance_file.c_str(), *allowed);
      std::exit(1);
    }
    if (g.accept_token(token) != tern::Error::Ok) die("accept " + c.name);
  }
  bool end_allowed = false;
  for (uint32_t k = 0; k < vocab.end_token_count(); ++k) {
    end_allowed = end_allowed || std::isfinite(logits[static_cast<size_t>(vocab.end_tokens()[k])]);
  }
  if (!g.accepting() || !end_allowed) {
    std::fprintf(stderr, "tern-grammar-compile-bench: %s: the instance %s is not a complete sentence\n", c.name.c_str(),
                 c.instance_file.c_str());
    std::exit(1);
  }
}

// The instance's tokens, written before the compile: a compile killed by a timeout still
// leaves them for the comparison with llama.cpp's.
void write_raw_tokens(std::FILE* f, const Case& c) {
  std::fprintf(f, "tern\t%s\ttokens", c.name.c_str());
  for (int32_t t : c.tokens) std::fprintf(f, "\t%d", t);
  std::fprintf(f, "\n");
  std::fflush(f);
}

void write_raw(std::FILE* f, const Case& c) {
  std::fprintf(f, "tern\t%s\tcompile_ms", c.name.c_str());
  for (double v : c.compile_ms) std::fprintf(f, "\t%.3f", v);
  std::fprintf(f, "\ntern\t%s\tcompile_cpu_ms", c.name.c_str());
  for (double v : c.compile_cpu_ms) std::fprintf(f, "\t%.3f", v);
  std::fprintf(f, "\ntern\t%s\tmemory_bytes\t%zu\ntern\t%s\tallowed", c.name.c_str(), c.used_bytes, c.name.c_str());
  for (uint32_t v : c.allowed) std::fprintf(f, "\t%u", v);
  std::fprintf(f, "\ntern\t%s\tmask_ms", c.name.c_str());
  for (double v : c.mask_ms) std::fprintf(f, "\t%.5f", v);
  std::fprintf(f, "\n");
}

void print_row(Case& c) {
  std::vector<double> wall = c.compile_ms, cpu = c.compile_cpu_ms, mask = c.mask_ms;
  const double lo = *std::min_element(wall.begin(), wall.end()), hi = *std::max_element(wall.begin(), wall.end());
  double allowed_mean = 0;
  for (uint32_t v : c.allowed) allowed_mean += v;
  allowed_mean /= static_cast<double>(c.allowed.size());
  std::printf("| %s | %zu | %.1f (%.1f–%.1f) | %.1f | %.2f MiB | %.4f | %.4f | %.0f |\n", c.name.c_str(),
              c.tokens.size(), quantile(wall, 0.5), lo, hi, quantile(cpu, 0.5),
              static_cast<double>(c.used_bytes) / (1024.0 * 1024.0), quantile(mask, 0.5), quantile(mask, 0.99),
              allowed_mean);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Grammar compile time, memory and per-token mask time, without the model's weights"};
  Options o;
  app.add_option("BUNDLE", o.bundle, ".tern bundle (only its tokenizer is used)")->required();
  app.add_option("--grammar", o.grammars, "GBNF grammar file (repeatable)");
  app.add_option("--json-schema", o.schemas, "JSON Schema file (repeatable)");
  app.add_option("-r,--rounds", o.rounds, "compiles and instance walks per grammar")->check(CLI::PositiveNumber);
  app.add_option("--grammar-memory", o.memory, "the compile region (default 64M)");
  app.add_option("--dump", o.dump, "write each grammar's GBNF text into this directory");
  app.add_flag("--dump-only", o.dump_only, "with --dump: write the GBNF texts and stop");
  app.add_option("--raw", o.raw, "append every measurement to this file (tab-separated)");
  CLI11_PARSE(app, argc, argv);

  std::vector<Case> cases;
  read_cases(o, &cases);
  if (!o.dump.empty() && !dump_grammars(o.dump, cases)) return 1;
  if (o.dump_only) return 0;
  uint64_t region_bytes = 0;
  if (tern_parse_byte_size(o.memory.c_str(), &region_bytes) != TERN_OK) die("--grammar-memory");

  tern::ModelParams params;
  params.threads = 1;
  params.context_tokens = 64;
  params.sessions = 1;
  params.grammar_bytes = 64 * 1024;  // builds the grammar vocabulary; the compiles use their own region
  auto model = tern::Model::load(o.bundle.c_str(), params);
  if (!model.ok()) die("load " + o.bundle);
  tern::Model& mdl = **model;
  const tern::GrammarVocab& vocab = mdl.grammar_vocab();
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  std::printf("bundle %s, vocabulary %u tokens, %u rounds, region %s, load average %.2f at start\n\n",
              base_name(o.bundle).c_str(), vocab.size(), o.rounds, o.memory.c_str(), load[0]);
  std::printf(
      "| grammar | tokens | compile ms, median (range) | compile CPU ms | memory used | mask ms/token, median | "
      "p99 | allowed, mean |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  std::FILE* raw = o.raw.empty() ? nullptr : std::fopen(o.raw.c_str(), "a");
  if (!o.raw.empty() && raw == nullptr) die("cannot open " + o.raw);

  std::vector<std::max_align_t> region((region_bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t));
  std::vector<float> logits(vocab.size());
  for (Case& c : cases) {
    tokenize(mdl, c);
    if (raw != nullptr) write_raw_tokens(raw, c);
    tern::Grammar g;
    for (unsigned r = 0; r < o.rounds; ++r) compile_once(vocab, c, g, region);
    for (unsigned r = 0; r < o.rounds; ++r) walk_once(vocab, c, g, logits);
    g.clear();
    print_row(c);
    if (raw != nullptr) {
      write_raw(raw, c);
      std::fflush(raw);
    }
  }
  if (raw != nullptr) std::fclose(raw);
  getloadavg(load, 3);
  std::printf("\nload average %.2f at end\n", load[0]);
  return 0;
}
