// What tern-grammar-bench and bench/peers/llama_grammar_bench.cpp record per mode and the one
// table both print: decode speed with sampling, its split into decode and sampling, and the
// ratio constrained / unconstrained of each round (measured in the same round, so a busy
// machine slows both alike). Header-only: the llama.cpp bench is built outside this tree.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace tern::bench {

struct ModeResults {
  std::string name;     // "unconstrained" or the grammar's file name
  std::string grammar;  // GBNF, empty for unconstrained
  std::vector<double> tok_s, ratio, sample_ms, decode_ms;
  unsigned restarts = 0;  // grammars completed and started again
};

struct Spread {
  double mean = 0, sd = 0, min = 0, max = 0;
};

inline Spread spread(const std::vector<double>& v) {
  Spread s;
  if (v.empty()) return s;
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.sd += (x - s.mean) * (x - s.mean);
  s.sd = v.size() > 1 ? std::sqrt(s.sd / static_cast<double>(v.size() - 1)) : 0.0;
  return s;
}

// One timed run of a mode: n tokens in `seconds`, `sample_s` of them sampling and `decode_s`
// decoding. Returns its tokens per second.
inline double record_run(ModeResults& m, unsigned n, double seconds, double sample_s, double decode_s) {
  m.tok_s.push_back(n / seconds);
  m.sample_ms.push_back(1e3 * sample_s / n);
  m.decode_ms.push_back(1e3 * decode_s / n);
  return n / seconds;
}

// One round's tokens per second of each mode (modes[0] is unconstrained): the ratios.
template <class Mode>
void add_round(std::vector<Mode>& modes, const std::vector<double>& rate) {
  for (size_t i = 1; i < modes.size(); ++i) modes[i].ratio.push_back(rate[i] / rate[0]);
}

template <class Mode>
void print_table(const std::vector<Mode>& modes, unsigned rounds, unsigned tokens, double load_end) {
  std::printf("%u rounds of %u tokens per mode, interleaved; load average %.2f at end\n\n", rounds, tokens, load_end);
  std::printf(
      "| mode | tok/s | decode ms/token | sample ms/token | constrained / unconstrained | range | restarts |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const ModeResults& m : modes) {
    const Spread t = spread(m.tok_s), d = spread(m.decode_ms), s = spread(m.sample_ms), r = spread(m.ratio);
    if (m.grammar.empty()) {
      std::printf("| %s | %.2f ± %.2f | %.2f | %.3f | 1 | | |\n", m.name.c_str(), t.mean, t.sd, d.mean, s.mean);
    } else {
      std::printf("| %s | %.2f ± %.2f | %.2f | %.3f | %.3f ± %.3f | %.3f – %.3f | %u |\n", m.name.c_str(), t.mean, t.sd,
                  d.mean, s.mean, r.mean, r.sd, r.min, r.max, m.restarts);
    }
  }
}

}  // namespace tern::bench
