// llama_grammar_compile_bench: llama.cpp's grammar sampler by tern-grammar-compile-bench's
// procedure, on a vocabulary loaded alone (vocab_only, no weights). For each GBNF file:
//   init    llama_sampler_init_grammar(vocab, text, "root"), ROUNDS times: wall time (median,
//           range) and thread CPU time. llama.cpp parses the grammar here and precomputes
//           nothing over the vocabulary.
//   mask    the instance (GRAMMAR's INSTANCE argument) tokenized with llama_tokenize (no BOS,
//           no special-token parsing), walked ROUNDS times with a new sampler: before each
//           token, llama_sampler_apply on a full candidates array (every id, logit 0: the
//           grammar sampler alone, as used without common_sampler's sample-first fast path;
//           timed), the token must be left finite, then llama_sampler_accept (timed apart).
//           Also timed: the fast path's check, llama_sampler_apply on a one-candidate array
//           holding the token. After the last token the full apply is timed once more and
//           must leave an end-of-generation token. Median and p99 over every timed step.
// A token the grammar refuses is an error (exit 1). Results as a Markdown table on stdout,
// and with a RAW file every sample, tab-separated, for bench/grammar_compile_peers.sh.
//
// Built outside Tern's tree against a llama.cpp checkout (bench/peers/
// llama_grammar_compile_bench.sh); none of llama.cpp's code is in this repository.
//   llama_grammar_compile_bench VOCAB.gguf ROUNDS RAW|- GRAMMAR.gbnf=INSTANCE.json ...
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return 1e3 * static_cast<double>(ts.tv_sec) + 1e-6 * static_cast<double>(ts.tv_nsec);
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[rank == 0 ? 0 : rank - 1];
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "llama_grammar_compile_bench: %s\n", what.c_str());
  std::exit(1);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) die("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string first_error;  // the first line of llama.cpp's first error since it was cleared

struct Case {
  std::string name, gbnf, instance_file, instance;
  std::vector<llama_token> tokens;
  std::vector<double> init_ms, init_cpu_ms, apply_ms, fast_ms, accept_ms;
  std::vector<unsigned> allowed;  // per step of the last walk
};

void tokenize(const llama_vocab* vocab, Case& c) {
  c.tokens.resize(c.instance.size() + 16);
  const int n = llama_tokenize(vocab, c.instance.data(), static_cast<int32_t>(c.instance.size()), c.tokens.data(),
                               static_cast<int32_t>(c.tokens.size()), /*add_special=*/false, /*parse_special=*/false);
  if (n < 0) die("cannot tokenize " + c.instance_file);
  c.tokens.resize(static_cast<size_t>(n));
}

void init_rounds(const llama_vocab* vocab, Case& c, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    first_error.clear();
    const double cpu0 = thread_cpu_ms(), t0 = now_ms();
    llama_sampler* s = llama_sampler_init_grammar(vocab, c.gbnf.c_str(), "root");
    c.init_ms.push_back(now_ms() - t0);
    c.init_cpu_ms.push_back(thread_cpu_ms() - cpu0);
    if (s == nullptr) die(c.name + ": llama_sampler_init_grammar failed (" + first_error + ")");
    llama_sampler_free(s);
  }
}

// One walk of the instance with a new sampler; exits on a token the grammar refuses.
void walk_once(const llama_vocab* vocab, Case& c, std::vector<llama_token_data>& cand) {
  llama_sampler* s = llama_sampler_init_grammar(vocab, c.gbnf.c_str(), "root");
  if (s == nullptr) die(c.name + ": llama_sampler_init_grammar failed");
  c.allowed.clear();
  const size_t n_vocab = cand.size();
  for (size_t i = 0; i <= c.tokens.size(); ++i) {
    const bool last = i == c.tokens.size();
    if (!last) {  // the fast path: is the sampled token allowed?
      llama_token_data one = {c.tokens[i], 0.0f, 0.0f};
      llama_token_data_array one_p = {&one, 1, -1, false};
      const double t0 = now_ms();
      llama_sampler_apply(s, &one_p);
      c.fast_ms.push_back(now_ms() - t0);
      if (!std::isfinite(one.logit)) die(c.name + ": the fast path refuses token " + std::to_string(i));
    }
    for (size_t k = 0; k < n_vocab; ++k) cand[k] = {static_cast<llama_token>(k), 0.0f, 0.0f};
    llama_token_data_array cur_p = {cand.data(), n_vocab, -1, false};
    const double t0 = now_ms();
    llama_sampler_apply(s, &cur_p);
    c.apply_ms.push_back(now_ms() - t0);
    unsigned allowed = 0;
    bool eog_allowed = false;
    for (size_t k = 0; k < n_vocab; ++k) {
      if (!std::isfinite(cand[k].logit)) continue;
      ++allowed;
      eog_allowed = eog_allowed || llama_vocab_is_eog(vocab, cand[k].id);
    }
    c.allowed.push_back(allowed);
    if (last) {
      if (!eog_allowed) die(c.name + ": no end-of-generation token after the instance " + c.instance_file);
      break;
    }
    const llama_token token = c.tokens[i];
    if (cand[static_cast<size_t>(token)].id != token || !std::isfinite(cand[static_cast<size_t>(token)].logit)) {
      die(c.name + ": token " + std::to_string(i) + " (id " + std::to_string(token) + ") of " + c.instance_file +
          " is not allowed (" + std::to_string(allowed) + " are)");
    }
    const double a0 = now_ms();
    llama_sampler_accept(s, token);
    c.accept_ms.push_back(now_ms() - a0);
  }
  llama_sampler_free(s);
}

void write_list(std::FILE* f, const Case& c, const char* what, const std::vector<double>& v) {
  std::fprintf(f, "llama\t%s\t%s", c.name.c_str(), what);
  for (double x : v) std::fprintf(f, "\t%.5f", x);
  std::fprintf(f, "\n");
}

// The instance's tokens, written before the init: a grammar llama.cpp refuses, or a walk
// killed by a timeout, still leaves them for the comparison with Tern's.
void write_raw_tokens(std::FILE* f, const Case& c) {
  std::fprintf(f, "llama\t%s\ttokens", c.name.c_str());
  for (llama_token t : c.tokens) std::fprintf(f, "\t%d", t);
  std::fprintf(f, "\n");
  std::fflush(f);
}

void write_raw(std::FILE* f, const Case& c) {
  std::fprintf(f, "llama\t%s\tallowed", c.name.c_str());
  for (unsigned v : c.allowed) std::fprintf(f, "\t%u", v);
  std::fprintf(f, "\n");
  write_list(f, c, "compile_ms", c.init_ms);
  write_list(f, c, "compile_cpu_ms", c.init_cpu_ms);
  write_list(f, c, "mask_ms", c.apply_ms);
  write_list(f, c, "fast_ms", c.fast_ms);
  write_list(f, c, "accept_ms", c.accept_ms);
}

void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level < GGML_LOG_LEVEL_ERROR) return;
  std::fputs(text, stderr);
  const std::string line(text, std::strcspn(text, "\n"));
  if (first_error.empty()) first_error = line;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s VOCAB.gguf ROUNDS RAW|- GRAMMAR.gbnf=INSTANCE.json ...\n", argv[0]);
    return 2;
  }
  const int rounds = std::atoi(argv[2]);
  if (rounds < 1) die("ROUNDS must be positive");
  std::vector<Case> cases;
  for (int i = 4; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) die("expected GRAMMAR.gbnf=INSTANCE.json, not " + arg);
    Case c;
    const std::string path = arg.substr(0, eq);
    c.name = path.substr(path.find_last_of('/') + 1);
    if (c.name.size() > 5 && c.name.compare(c.name.size() - 5, 5, ".gbnf") == 0) c.name.resize(c.name.size() - 5);
    c.gbnf = read_file(path);
    c.instance_file = arg.substr(eq + 1);
    c.instance = read_file(c.instance_file);
    while (!c.instance.empty() && std::strchr(" \t\r\n", c.instance.back()) != nullptr) c.instance.pop_back();
    cases.push_back(c);
  }
  llama_log_set(quiet_log, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) die(std::string("cannot load ") + argv[1]);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::FILE* raw = std::strcmp(argv[3], "-") == 0 ? nullptr : std::fopen(argv[3], "a");
  if (std::strcmp(argv[3], "-") != 0 && raw == nullptr) die(std::string("cannot open ") + argv[3]);
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  std::printf("llama.cpp grammar sampler, vocabulary %d tokens, %d rounds, load average %.2f at start\n\n",
              llama_vocab_n_tokens(vocab), rounds, load[0]);
  std::printf(
      "| grammar | tokens | init ms, median (range) | init CPU ms | apply ms/token, median | p99 | fast path ms, "
      "median | accept ms, median | allowed, mean |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
      "|\n");
  std::vector<llama_token_data> cand(static_cast<size_t>(llama_vocab_n_tokens(vocab)));
  for (Case& c : cases) {
    tokenize(vocab, c);
    if (raw != nullptr) write_raw_tokens(raw, c);
    init_rounds(vocab, c, rounds);
    for (int r = 0; r < rounds; ++r) walk_once(vocab, c, cand);
    double allowed_mean = 0;
    for (unsigned v : c.allowed) allowed_mean += v;
    allowed_mean /= static_cast<double>(c.allowed.size());
    std::printf("| %s | %zu | %.2f (%.2f–%.2f) | %.2f | %.3f | %.3f | %.4f | %.4f | %.0f |\n", c.name.c_str(),
                c.tokens.size(), quantile(c.init_ms, 0.5), quantile(c.init_ms, 0), quantile(c.init_ms, 1),
                quantile(c.init_cpu_ms, 0.5), quantile(c.apply_ms, 0.5), quantile(c.apply_ms, 0.99),
                quantile(c.fast_ms, 0.5), quantile(c.accept_ms, 0.5), allowed_mean);
    std::fflush(stdout);
    if (raw != nullptr) {
      write_raw(raw, c);
      std::fflush(raw);
    }
  }
  if (raw != nullptr) std::fclose(raw);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
