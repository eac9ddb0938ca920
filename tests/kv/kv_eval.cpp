// Perplexity and greedy agreement of bitllama2c-3M with each KV mode, teacher-forced one
// token at a time through the runtime's forward pass (which reads the cache back through
// the KvCache interface, so it sees exactly what the compressed cache keeps).
//   tern-kv-eval [--text FILE] [--context 512] [--chunks 4]
#include <CLI/CLI.hpp>
#include <sentencepiece_processor.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "converter/kv_calibration.h"
#include "runtime/forward.h"
#include "runtime/kv_compressed_cache.h"
#include "tests/runtime/bitllama2c_reader.h"
#include "tests/test_util.h"

namespace tern {
namespace {

struct Mode {
  std::string name;
  bool dense = false;
  KvType dense_type = KvType::F32;
  KvCacheProfile profile;
  std::vector<KvHeadBits> bits;  // per head when non-empty
};

struct RunResult {
  double nll = 0;
  size_t predictions = 0;
  std::vector<int32_t> argmax;
  std::vector<float> log_probs;  // [prediction][vocab] when kept
};

RunResult run(const Model& model, Mode& mode, const std::vector<int32_t>& ids, uint32_t context, uint32_t chunks,
              bool keep_log_probs = false) {
  const ModelConfig& c = model.config();
  size_t scratch_bytes = 0;
  ForwardScratch scratch;
  (void)carve_forward_scratch(c, 1, context, nullptr, &scratch, &scratch_bytes);
  if (!mode.bits.empty()) mode.profile.head_bits = mode.bits.data();
  const size_t kv_bytes =
      mode.dense ? kv_arena_bytes(mode.dense_type, kv_shape_of(c), context) : kv_bytes_for_tokens(mode.profile, context);
  std::vector<uint8_t> buffer(scratch_bytes + kv_bytes + 4096);
  RunResult r;
  for (uint32_t chunk = 0; chunk < chunks; ++chunk) {
    if (static_cast<size_t>(chunk + 1) * context > ids.size()) break;
    ArenaAllocator arena(buffer.data(), buffer.size());
    if (carve_forward_scratch(c, 1, context, &arena, &scratch, &scratch_bytes) != Error::Ok) std::abort();
    KvCache* kv = nullptr;
    if (mode.dense) {
      kv = *create_kv_cache(mode.dense_type, kv_shape_of(c), context, arena);
    } else {
      auto made = CompressedKvCache::create(mode.profile, context, arena);
      if (!made.ok()) {
        std::fprintf(stderr, "%s: %s\n", mode.name.c_str(), last_error_message());
        std::abort();
      }
      kv = *made;
    }
    const int32_t* tokens = ids.data() + static_cast<size_t>(chunk) * context;
    for (uint32_t pos = 0; pos + 1 < context; ++pos) {
      if (forward(model, *kv, scratch, tokens + pos, 1, pos, true, nullptr) != Error::Ok) std::abort();
      const float* logits = scratch.logits;
      float mx = logits[0];
      int32_t best = 0;
      for (uint32_t i = 1; i < c.vocab; ++i)
        if (logits[i] > mx) mx = logits[i], best = static_cast<int32_t>(i);
      double sum = 0;
      for (uint32_t i = 0; i < c.vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
      r.nll += -(logits[tokens[pos + 1]] - mx - std::log(sum));
      if (keep_log_probs)
        for (uint32_t i = 0; i < c.vocab; ++i) r.log_probs.push_back(static_cast<float>(logits[i] - mx - std::log(sum)));
      ++r.predictions;
      r.argmax.push_back(best);
    }
  }
  return r;
}

std::vector<int32_t> tokenize_stories(const std::string& spm_path, const std::string& text_path) {
  sentencepiece::SentencePieceProcessor spm;
  std::vector<int32_t> ids;
  if (!spm.Load(spm_path).ok()) return ids;
  std::ifstream in(text_path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<int> pieces;
  // Stories are separated by blank lines; each starts with BOS like the training data.
  std::string story, line;
  std::istringstream lines(ss.str());
  auto flush = [&] {
    if (story.empty()) return;
    spm.Encode(story, &pieces);
    ids.push_back(1);
    ids.insert(ids.end(), pieces.begin(), pieces.end());
    story.clear();
  };
  while (std::getline(lines, line)) {
    if (line.empty()) flush();
    else story += (story.empty() ? "" : "\n") + line;
  }
  flush();
  return ids;
}

void print_sizes() {
  struct Shape {
    const char* name;
    KvShape shape;
  };
  const Shape shapes[] = {{"bitnet-b1.58-2B-4T", {30, 5, 128}}, {"bitllama2c-3M", {8, 4, 32}}};
  std::printf("| model | mode | block G | value group | bytes/token | bits/element | vs fp16 |\n");
  std::printf("| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
  for (const Shape& s : shapes) {
    const double fp16 = static_cast<double>(kv_bytes_per_token(KvType::F16, s.shape));
    std::printf("| %s | fp16 | - | - | %.0f | 16.00 | 1.00x |\n", s.name, fp16);
    for (uint32_t g : {32u, 128u}) {
      for (uint8_t b : {8, 4, 3, 2}) {
        KvCacheProfile p;
        p.shape = s.shape;
        p.block_tokens = g;
        p.value_group = std::min(g, s.shape.head_dim);
        p.uniform = KvHeadBits{b, b};
        const double bpt = kv_bytes_per_token(p);
        std::printf("| %s | q%u | %u | %u | %.1f | %.3f | %.2fx |\n", s.name, b, g, p.value_group, bpt,
                    kv_average_bits(p), fp16 / bpt);
      }
    }
  }
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  using namespace tern;
  CLI::App app{"KV-mode quality on bitllama2c-3M"};
  std::string text_path = tern::testing::shared_path("corpus/tinystories-sample-a.txt");
  std::string model_path = tern::testing::shared_path("models/bitllama2c-3M/bit_model.bin");
  std::string spm_path = tern::testing::shared_path("models/bitllama2c-3M/tokenizer.model");
  uint32_t context = 512, chunks = 4;
  std::string only;
  bool sizes = false;
  uint32_t sensitivity_tokens = 0;
  bool split_kv = false;
  app.add_flag("--split-kv", split_kv, "sensitivity and allocation for keys and values separately");
  std::string bundle_path;
  size_t tail_bytes = 0;
  app.add_option("--bundle", bundle_path, "a .tern bundle instead of bitllama2c-3M's bit_model.bin");
  app.add_option("--tail-bytes", tail_bytes, "evaluate only the last N bytes of the text");
  app.add_option("--sensitivity", sensitivity_tokens,
                 "measure per-head sensitivity over this many tokens, then add adaptive modes");
  app.add_flag("--sizes", sizes, "print KV bytes per token per mode for 2B-4T and bitllama2c-3M, then exit");
  app.add_option("--text", text_path);
  app.add_option("--model", model_path);
  app.add_option("--context", context);
  app.add_option("--chunks", chunks);
  app.add_option("--only", only, "evaluate only modes whose name contains this");
  CLI11_PARSE(app, argc, argv);

  if (sizes) {
    print_sizes();
    return 0;
  }
  std::unique_ptr<tern::testing::Bitllama2cWeights> w;
  std::unique_ptr<Model> model;
  std::vector<int32_t> ids;
  if (!bundle_path.empty()) {
    // A converted bundle (e.g. tiny-austen) with its own tokenizer; --tail-bytes takes the
    // end of the text (tiny-austen holds out the last 2 % of its stream, the end of SOTU).
    ModelParams params;
    auto loaded = Model::load(bundle_path.c_str(), params);
    if (!loaded.ok() || (*loaded)->tokenizer() == nullptr) {
      std::fprintf(stderr, "%s: %s\n", bundle_path.c_str(), last_error_message());
      return 1;
    }
    model = std::move(loaded).value();
    std::ifstream in(text_path);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    if (tail_bytes > 0 && tail_bytes < text.size()) {
      text = text.substr(text.size() - tail_bytes);
      text = text.substr(std::min(text.size(), text.find(' ') + 1));  // start at a word
    }
    ids.resize(text.size() + 16);
    auto n = model->tokenizer()->encode(text.data(), text.size(), true, false, ids.data(), ids.size());
    if (!n.ok()) {
      std::fprintf(stderr, "encode: %s\n", last_error_message());
      return 1;
    }
    ids.resize(*n);
    std::fprintf(stderr, "%zu bytes of text -> %zu tokens\n", text.size(), ids.size());
  } else {
    w = tern::testing::read_bitllama2c(model_path);
    if (!w) return 1;
    ModelParams params;
    auto created = Model::create(w->config, w->weights, params, w->bytes);
    if (!created.ok()) return 1;
    model = std::move(created).value();
    ids = tokenize_stories(spm_path, text_path);
  }
  const ModelConfig& c = model->config();
  std::printf("%s: %u layers x %u kv heads x %u dims; %zu tokens of %s; context %u x %u chunks\n",
              bundle_path.empty() ? "bitllama2c-3M" : bundle_path.c_str(), c.layers, c.kv_heads, c.head_dim,
              ids.size(), text_path.c_str(), context, chunks);
  std::vector<Mode> modes;
  Mode f32{"f32", true, KvType::F32, {}, {}};
  Mode f16{"fp16", true, KvType::F16, {}, {}};
  modes.push_back(f32);
  modes.push_back(f16);
  auto quant = [&](const std::string& name, uint8_t kb, uint8_t vb, std::function<void(KvCacheProfile&)> tweak) {
    Mode m;
    m.name = name;
    m.profile.shape = kv_shape_of(c);
    m.profile.exact_type = KvType::F16;
    m.profile.sink_tokens = 4;
    m.profile.recent_window = 32;
    m.profile.block_tokens = 32;
    m.profile.value_group = 32;
    m.profile.rotate = true;
    m.profile.eviction = KvEviction::None;
    m.profile.uniform = KvHeadBits{kb, vb};
    if (tweak) tweak(m.profile);
    modes.push_back(m);
  };
  for (uint8_t b : {8, 4, 3, 2}) quant("q" + std::to_string(b), b, b, nullptr);
  quant("q2 no-rotation", 2, 2, [](KvCacheProfile& p) { p.rotate = false; });
  quant("q2 window 0", 2, 2, [](KvCacheProfile& p) { p.recent_window = 0; });
  quant("q2 block 16", 2, 2, [](KvCacheProfile& p) { p.block_tokens = 16; });
  quant("q2 vgroup 16", 2, 2, [](KvCacheProfile& p) { p.value_group = 16; });
  quant("k4v2", 4, 2, nullptr);
  quant("k2v4", 2, 4, nullptr);
  quant("q3 window 0", 3, 3, [](KvCacheProfile& p) { p.recent_window = 0; });
  quant("q4 window 0", 4, 4, [](KvCacheProfile& p) { p.recent_window = 0; });
  quant("q2 block 128", 2, 2, [](KvCacheProfile& p) { p.block_tokens = 128; });
  quant("q3 block 128", 3, 3, [](KvCacheProfile& p) { p.block_tokens = 128; });
  quant("k2v3 block 128", 2, 3, [](KvCacheProfile& p) { p.block_tokens = 128; });
  quant("q2 no-rotation window 0", 2, 2, [](KvCacheProfile& p) {
    p.rotate = false;
    p.recent_window = 0;
  });

  if (sensitivity_tokens > 0) {
    // Per-head sensitivity: mean ΔNLL when that KV head alone is quantized (keys and
    // values at the same width), every other head exact; then allocations by
    // kvcal::allocate_by_sensitivity at several averages, evaluated like the other modes.
    Mode exact_all;
    exact_all.name = "exact";
    exact_all.profile.shape = kv_shape_of(c);
    exact_all.profile.exact_type = KvType::F16;
    exact_all.profile.eviction = KvEviction::None;
    exact_all.profile.uniform = KvHeadBits{0, 0};
    const RunResult base = run(*model, exact_all, ids, sensitivity_tokens, 1, true);
    // KL(exact || quantized) of the next-token distributions, averaged over positions:
    // always >= 0 and far less noisy than the NLL of the one observed token.
    auto kl = [&](const RunResult& r) {
      double total = 0;
      for (size_t i = 0; i < base.log_probs.size(); ++i)
        total += std::exp(static_cast<double>(base.log_probs[i])) * (base.log_probs[i] - r.log_probs[i]);
      return total / static_cast<double>(base.predictions);
    };
    const size_t heads = static_cast<size_t>(c.layers) * c.kv_heads;
    // With --split-kv the items are keys and values of each head (the other side at 8 bits).
    const size_t items = split_kv ? 2 * heads : heads;
    std::vector<std::array<double, 4>> err(items);
    std::printf("sensitivity (mean KL(exact||quantized) x 1e3 over %u tokens) per head: w2 w3 w4\n", sensitivity_tokens);
    for (size_t h = 0; h < items; ++h) {
      for (int wi = 0; wi < 4; ++wi) {
        const uint8_t w = static_cast<uint8_t>(kvcal::kWidths[wi]);
        if (w == 8) {
          err[h][wi] = 0;  // 8-bit is indistinguishable from exact at this scale (see the q8 row)
          continue;
        }
        Mode m = modes[2];  // q8 settings with one head changed below
        m.name = "one-head";
        m.bits.assign(heads, KvHeadBits{0, 0});
        if (!split_kv) {
          m.bits[h] = KvHeadBits{w, w};
        } else {
          m.bits[h / 2] = h % 2 == 0 ? KvHeadBits{w, 8} : KvHeadBits{8, w};
        }
        const RunResult r = run(*model, m, ids, sensitivity_tokens, 1, true);
        err[h][wi] = kl(r);
      }
      const size_t head = split_kv ? h / 2 : h;
      std::printf("  %zu.%zu%s: %.3f %.3f %.3f\n", head / c.kv_heads, head % c.kv_heads,
                  split_kv ? (h % 2 == 0 ? " K" : " V") : "", err[h][0] * 1e3, err[h][1] * 1e3, err[h][2] * 1e3);
      std::fflush(stdout);
    }
    for (double avg : {2.5, 3.0, 3.5}) {
      const kvcal::Allocation a = kvcal::allocate_by_sensitivity(err, avg);
      const kvcal::Allocation u = kvcal::allocate_uniform(heads, avg);
      Mode am = modes[2], um = modes[2];
      am.name = (split_kv ? "adaptive-kv:" : "adaptive:") + std::to_string(avg).substr(0, 3);
      um.name = "uniform:" + std::to_string(avg).substr(0, 3);
      for (size_t h = 0; h < heads; ++h) {
        am.bits.push_back(split_kv ? KvHeadBits{a.bits[2 * h], a.bits[2 * h + 1]} : KvHeadBits{a.bits[h], a.bits[h]});
        um.bits.push_back(KvHeadBits{u.bits[h], u.bits[h]});
      }
      std::string layout;
      for (uint8_t b : a.bits) layout += std::to_string(b);
      std::printf("%s widths (layer-major): %s\n", am.name.c_str(), layout.c_str());
      modes.push_back(um);
      modes.push_back(am);
    }
  }

  RunResult reference;
  std::printf("| mode | KV bytes/token | bits/element | PPL | ΔPPL vs f32 | greedy agreement | seconds |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (Mode& m : modes) {
    bool wanted = only.empty() || m.name == "f32";
    for (size_t at = 0; !wanted && at <= only.size();) {  // comma-separated substrings
      const size_t end = std::min(only.find(',', at), only.size());
      wanted = m.name.find(only.substr(at, end - at)) != std::string::npos;
      at = end + 1;
    }
    if (!wanted) continue;
    const auto t0 = std::chrono::steady_clock::now();
    const RunResult r = run(*model, m, ids, context, chunks);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (m.name == "f32") reference = r;
    const double ppl = std::exp(r.nll / r.predictions), ref_ppl = std::exp(reference.nll / reference.predictions);
    size_t agree = 0;
    for (size_t i = 0; i < r.argmax.size(); ++i) agree += r.argmax[i] == reference.argmax[i];
    const double bpt = m.dense ? static_cast<double>(kv_bytes_per_token(m.dense_type, kv_shape_of(c)))
                               : kv_bytes_per_token(m.profile);
    const double bits = bpt * 8 / (2.0 * c.layers * c.kv_heads * c.head_dim);
    std::printf("| %s | %.0f | %.2f | %.4f | %+.2f %% | %.2f %% | %.1f |\n", m.name.c_str(), bpt, bits, ppl,
                100.0 * (ppl / ref_ppl - 1), 100.0 * agree / r.argmax.size(), seconds);
    std::fflush(stdout);
  }
  return 0;
}
