// tern-convert: checkpoint (HF directory, GGUF, bitllama2c .bin) or a synthetic preset
// -> verified .tern bundle, with a size summary.
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <string>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "converter/calibration/kv_calibrate.h"
#include "converter/import/import.h"
#include "converter/import/synthetic.h"
#include "converter/tokenizer/chat_format.h"
#include "converter/writer/bundle_writer.h"
#include "platform/thread_pool.h"
#include "runtime/model/bundle.h"
#include "tools/common/cli_files.h"

using namespace tern;
using namespace tern::convert;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// A one-line bar, redrawn in place on a terminal; silent otherwise (logs stay clean).
ProgressFn make_progress(bool enabled) {
  if (!enabled || !isatty(STDERR_FILENO)) return nullptr;
  return [](const char* step, uint64_t done, uint64_t total) {
    const int width = 40;
    const double frac = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
    const int fill = static_cast<int>(frac * width);
    std::fprintf(stderr, "\r%-9s [%.*s%*s] %5.1f%%", step, fill, "########################################",
                 width - fill, "", frac * 100.0);
    if (done >= total) std::fputc('\n', stderr);
    std::fflush(stderr);
  };
}

struct KindTotals {
  size_t tensors = 0;
  uint64_t bytes = 0;
  uint64_t weights = 0;
};

void print_summary(const Bundle& b, double import_s, double write_s, double verify_s) {
  KindTotals ternary, embed, other;
  std::string embed_type;
  for (size_t i = 0; i < b.tensor_count(); ++i) {
    auto v = b.tensor_at(i);
    if (!v.ok()) continue;
    uint64_t n = 1;
    for (uint32_t d = 0; d < v->ndim; ++d) n *= v->shape[d];
    uint64_t bytes = v->size_bytes;
    if (v->group_scales)
      bytes += dense_scale_count(v->dense_type, n / v->shape[v->ndim - 1], v->shape[v->ndim - 1], v->group) * 4;
    const std::string name = v->name;
    KindTotals& k = v->type == TensorType::Ternary                    ? ternary
                    : (name == "tok_embeddings" || name == "lm_head") ? embed
                                                                      : other;
    if (&k == &embed) embed_type = to_string(v->dense_type);
    k.tensors++;
    k.bytes += bytes;
    k.weights += n;
  }
  auto row = [](const char* kind, const KindTotals& k) {
    std::printf("  %-22s %8zu %14llu %10.1f %12.3f\n", kind, k.tensors, static_cast<unsigned long long>(k.bytes),
                k.bytes / 1e6, k.weights ? 8.0 * static_cast<double>(k.bytes) / static_cast<double>(k.weights) : 0.0);
  };
  const std::string embed_label = "embeddings (" + embed_type + ")";
  std::printf("\n  %-22s %8s %14s %10s %12s\n", "kind", "tensors", "bytes", "MB", "bits/weight");
  row("ternary", ternary);
  row(embed_label.c_str(), embed);
  row("norms / other dense", other);
  KindTotals total{ternary.tensors + embed.tensors + other.tensors, b.file_size(),
                   ternary.weights + embed.weights + other.weights};
  row("file total", total);
  std::printf("  time: %.2f s (import %.2f s, write %.2f s, verify %.2f s)\n", import_s + write_s + verify_s, import_s,
              write_s, verify_s);
}

// The command line: what to convert and how, and the optional KV calibration.
struct ConvertCli {
  std::string input, output, synthetic, embed = "f16";
  std::string packing = "2bit";
  ConvertOptions options;
  bool no_tokenizer = false, quiet = false;
  std::string calibrate_text;
  CalibrationOptions calib;
  bool calibrate = false;
};

void add_convert_options(CLI::App& app, ConvertCli* cli) {
  ConvertOptions& options = cli->options;
  CalibrationOptions& calib = cli->calib;
  app.add_option("input", cli->input, "HF checkpoint directory, .gguf file, or bitllama2c .bin");
  app.add_option("-o,--output", cli->output, "bundle to write (.tern)")->required();
  app.add_option("--synthetic", cli->synthetic, "random ternary weights with real shapes instead of an input")
      ->check(CLI::IsMember({"2b4t", "large", "3b", "tiny", "embed-0.6b", "embed-270m"}));
  app.add_option("--embed", cli->embed, "tok_embeddings / lm_head precision")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8", "q4"}));
  app.add_option("--ternary-packing", cli->packing,
                 "ternary weights: 2bit (t2_interleaved16, 2 bits/weight) or base3 (t3_interleaved16, 1.6 "
                 "bits/weight: 20% fewer bytes per token, more unpacking work; tern-plan says which is faster on "
                 "a device)")
      ->check(CLI::IsMember({"2bit", "base3"}));
  app.add_option("--embed-group", options.embed_group, "q8/q4 group size (columns)")->check(CLI::Range(2, 1 << 16));
  app.add_option("--tokenizer", options.tokenizer_path,
                 "tokenizer.json / tokenizer.model overriding the one found beside the input");
  app.add_option("--chat-template", options.chat_template_path,
                 "chat template overriding the checkpoint's: a tokenizer_config.json or the Jinja text");
  app.add_flag("--no-tokenizer", cli->no_tokenizer,
               "proceed when no tokenizer can be imported (the bundle will not run)");
  app.add_option("--seed", options.seed, "seed for --synthetic");
  app.add_option("--keep-layers", options.keep_layers,
                 "keep only the first N layers: a self-speculative draft model for this checkpoint (tern-run --draft)")
      ->check(CLI::Range(1u, 1u << 16));
  app.add_flag("-q,--quiet", cli->quiet, "no progress bar");
  app.add_option("--calibrate", cli->calibrate_text,
                 "calibrate the KV profile on TEXT (a file; without one, built-in varied text). Write --calibrate=FILE "
                 "or put it after the input")
      ->expected(0, 1);
  app.add_option("--kv-avg-bits", calib.average_bits, "average code bits of the primary KV allocation")
      ->check(CLI::Range(2.0, 8.0));
  app.add_option("--kv-window", calib.recent_window, "KV: most recent tokens kept exact (default 32)");
  app.add_option("--kv-sinks", calib.sink_tokens, "KV: first tokens kept exact (default 4)");
  app.add_option("--calib-tokens", calib.tokens, "calibration positions")->check(CLI::Range(128u, 1u << 20));
  calib.threads = static_cast<uint32_t>(available_cores());
  app.add_option("--calib-threads", calib.threads, "threads for calibration (default: one per core)")
      ->check(CLI::Range(1u, 256u));
}

// The parsed flags checked against each other and turned into ConvertOptions; 0, or the exit code.
int resolve_options(ConvertCli* cli) {
  ConvertOptions& options = cli->options;
  if (cli->calib.threads > available_cores()) {
    std::fprintf(stderr, "tern-convert: --calib-threads %u is more than the %zu cores; using %zu\n", cli->calib.threads,
                 available_cores(), available_cores());
    cli->calib.threads = static_cast<uint32_t>(available_cores());
  }

  if (cli->input.empty() == cli->synthetic.empty()) {
    std::fprintf(stderr, "tern-convert: give exactly one of INPUT or --synthetic PRESET\n");
    return 2;
  }
  const std::string& embed = cli->embed;
  if (embed == "f32") options.embed_type = DenseType::F32;
  if (embed == "f16") options.embed_type = DenseType::F16;
  if (embed == "bf16") options.embed_type = DenseType::BF16;
  if (embed == "q8") options.embed_type = DenseType::Q8;
  if (embed == "q4") options.embed_type = DenseType::Q4;
  if (options.embed_type == DenseType::Q4 && options.embed_group % 2 != 0) {
    std::fprintf(stderr, "tern-convert: --embed-group must be even for q4\n");
    return 2;
  }
  options.ternary_layout = cli->packing == "base3" ? TernaryLayout::T3Interleaved16 : TernaryLayout::T2Interleaved16;
  options.require_tokenizer = !cli->no_tokenizer;
  options.progress = !cli->quiet;
  return 0;
}

// The bundle's contents from the preset or the checkpoint (read into `ir`, which the contents
// point into), with the chat template override; 0, or the exit code.
int import_contents(ConvertCli* cli, ModelIR* ir, BundleContents* contents) {
  ConvertOptions& options = cli->options;
  if (!cli->synthetic.empty()) {
    auto c = synthetic_contents(cli->synthetic, options);
    if (!c.ok()) {
      std::fprintf(stderr, "tern-convert: %s\n", last_error_message());
      return 1;
    }
    *contents = std::move(c).value();
  } else {
    const std::string& input = cli->input;
    if (!cli->quiet) std::fprintf(stderr, "importing %s (%s)\n", input.c_str(), to_string(detect_format(input)));
    const ProgressFn bar = make_progress(options.progress);
    if (bar) options.on_progress = [&bar](const char* step, uint64_t done, uint64_t total) { bar(step, done, total); };
    auto r = import_model(input, options);
    if (!r.ok()) {
      std::fprintf(stderr, "tern-convert: %s\n", last_error_message());
      return 1;
    }
    *ir = std::move(r).value();
    *contents = contents_from_ir(*ir, options);
  }
  if (!options.chat_template_path.empty()) {
    auto chat = read_chat_template(options.chat_template_path);
    if (!chat.ok() || !contents->tokenizer) {
      std::fprintf(stderr, "tern-convert: %s\n",
                   chat.ok() ? "--chat-template needs a tokenizer in the bundle" : last_error_message());
      return 1;
    }
    contents->tokenizer->chat_template = *chat;
  }
  return 0;
}

// --calibrate: the KV profile measured on the written bundle, which is rewritten with it and
// reopened into `bundle`; the report and heatmap beside it. 0, or the exit code.
int calibrate_bundle(ConvertCli* cli, BundleContents* contents, Result<Bundle>* bundle) {
  const std::string& output = cli->output;
  CalibrationOptions& calib = cli->calib;
  if (!cli->calibrate_text.empty()) {
    std::string why;
    if (!cli::read_file(cli->calibrate_text, &calib.text, &why)) {
      std::fprintf(stderr, "tern-convert: cannot read calibration text %s\n", why.c_str());
      return 1;
    }
    calib.text_label = cli->calibrate_text;
  }
  *bundle = Result<Bundle>(Error::NotFound);  // drop the mapping: the file is rewritten below
  const ProgressFn bar = make_progress(cli->options.progress);
  if (bar) calib.progress = [&bar](const char* step, uint64_t done, uint64_t total) { bar(step, done, total); };
  if (!cli->quiet) std::fprintf(stderr, "calibrating the KV profile (%u positions)\n", calib.tokens);
  auto result = calibrate_kv(output, calib);
  if (!result.ok()) {
    std::fprintf(stderr, "tern-convert: calibration failed: %s\n", last_error_message());
    return 1;
  }
  const double calibrate_s = result->seconds;
  contents->kv_profile = result->profile;
  // Write beside and rename, so a failure leaves the uncalibrated bundle intact.
  const std::string partial = output + ".partial";
  auto rewritten = write_bundle(partial, *contents, nullptr);
  if (!rewritten.ok() || std::rename(partial.c_str(), output.c_str()) != 0) {
    std::fprintf(stderr, "tern-convert: rewriting with the KV profile failed: %s\n", last_error_message());
    return 1;
  }
  *bundle = Bundle::open(output.c_str());
  if (!bundle->ok()) {
    std::fprintf(stderr, "tern-convert: the calibrated bundle failed verification: %s\n", last_error_message());
    return 1;
  }
  std::string report_path, heatmap_path;
  if (write_calibration_files(output, *result, &report_path, &heatmap_path) != Error::Ok) {
    std::fprintf(stderr, "tern-convert: %s\n", last_error_message());
    return 1;
  }
  std::printf("%s\n", result->report.c_str());
  std::printf("KV calibration: %.1f s; report %s, heatmap %s\n\n", calibrate_s, report_path.c_str(),
              heatmap_path.c_str());
  return 0;
}

// What was written: the shape, the encodings, the chat format.
void print_written(const ConvertCli& cli, const BundleContents& contents, const Bundle& bundle,
                   const WriteStats& stats) {
  const ConvertOptions& options = cli.options;
  const ModelConfig& c = bundle.config();
  std::printf("wrote %s (%s, verified)\n", cli.output.c_str(), contents.source_format.c_str());
  std::printf("  hidden %u, ffn %u, layers %u, heads %u/%u kv, head dim %u, vocab %u\n", c.hidden, c.ffn_hidden,
              c.layers, c.heads, c.kv_heads, c.head_dim, c.vocab);
  std::printf("  embeddings: %s, %.1f MB\n", to_string(options.embed_type), stats.embedding_bytes / 1e6);
  std::printf("  ternary: %s\n", to_string(options.ternary_layout));
  if (contents.tokenizer) {
    const TokenizerIR& t = *contents.tokenizer;
    const ChatFormatIR chat = derive_chat_format(t.chat_template, t.add_bos && t.bos_id >= 0);
    std::printf("  chat format: %s%s\n", chat.name.c_str(),
                chat.recognized           ? ""
                : t.chat_template.empty() ? " (the checkpoint has no chat template)"
                                          : " (its chat template is not one Tern knows; --chat-template overrides it)");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tern-convert: turn a BitNet b1.58 checkpoint into a .tern bundle"};
  ConvertCli cli;
  add_convert_options(app, &cli);
  CLI11_PARSE(app, argc, argv);
  cli.calibrate = app.count("--calibrate") > 0;
  if (const int code = resolve_options(&cli)) return code;

  const auto t0 = std::chrono::steady_clock::now();
  ModelIR ir;
  BundleContents contents;
  if (const int code = import_contents(&cli, &ir, &contents)) return code;
  const double import_s = seconds_since(t0);

  const auto t1 = std::chrono::steady_clock::now();
  auto stats = write_bundle(cli.output, contents, make_progress(cli.options.progress));
  if (!stats.ok()) {
    std::fprintf(stderr, "tern-convert: %s\n", last_error_message());
    return 1;
  }
  const double write_s = seconds_since(t1);

  const auto t2 = std::chrono::steady_clock::now();
  auto bundle = Bundle::open(cli.output.c_str());
  if (!bundle.ok()) {
    std::fprintf(stderr, "tern-convert: the written bundle failed verification: %s\n", last_error_message());
    return 1;
  }
  const double verify_s = seconds_since(t2);

  if (cli.calibrate) {
    if (const int code = calibrate_bundle(&cli, &contents, &bundle)) return code;
  }

  print_written(cli, contents, *bundle, *stats);
  print_summary(*bundle, import_s, write_s, verify_s);
  return 0;
}
