// The flags of the CLIs that load a model (--memory-budget, --threads, --ctx, --batch, --kv,
// --kv-window, --kv-sinks, --verify-bundle, --weights-pages), worded alike in each, and the
// tern_model_params they ask for.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "include/tern.h"  // and nothing else of the project: tern-server uses this header

namespace tern::cli {

// What the model-loading flags hold. The defaults are tern_model_default_params()'s (kv "fp16"
// is its dense fp16 cache), so a CLI without one of the flags loads as the C API would.
struct ModelOptions {
  std::string memory_budget = "0";
  std::string kv = "fp16";
  std::string weights_pages = "auto";
  unsigned threads = 1, ctx = 0, batch = 64;
  int kv_window = -1, kv_sinks = -1;  // -1: the mode's default
  bool verify_bundle = false;         // read the whole bundle against its checksum before loading
};

// Each adder returns its option, for the checks a CLI puts on it. `names` keeps a CLI's own
// spelling (some have no short form); `help` is only for a CLI where the flag means more.
inline CLI::Option* add_memory_budget_option(CLI::App& app, std::string* budget) {
  return app.add_option("--memory-budget", *budget,
                        "bytes the process may use, whole: e.g. 512M, 1.5G, or available[-25%] (what the OS can "
                        "give now; 0: no limit)");
}

inline CLI::Option* add_threads_option(CLI::App& app, unsigned* threads, const std::string& names = "-t,--threads") {
  return app.add_option(names, *threads, "compute threads (0: one per core)");
}

inline CLI::Option* add_ctx_option(CLI::App& app, unsigned* ctx, const std::string& names = "-c,--ctx",
                                   const std::string& help =
                                       "context tokens per session (0: with --memory-budget as many as it "
                                       "allows, else the model's up to 4096, embedding models 8192; a budget "
                                       "that cannot hold N fails)") {
  return app.add_option(names, *ctx, help);
}

inline CLI::Option* add_batch_option(CLI::App& app, unsigned* batch, const std::string& names = "-b,--batch",
                                     const std::string& help = "prefill batch: tokens per forward pass (default 64)") {
  return app.add_option(names, *batch, help);
}

inline CLI::Option* add_kv_option(CLI::App& app, std::string* kv) {
  return app.add_option(
      "--kv", *kv,
      "KV mode: fp16|f16 (default), f32 (dense); q8, q4, q3, q2, k4v2 (compressed per head, eviction on); "
      "adaptive:B (the bundle's calibrated widths at B average bits); any compressed mode + >A@N (aging: blocks "
      "more than N tokens past the exact window stored at most A bits wide, e.g. q4>2@96); any mode + /hh "
      "(per-head token budgets from calibration, each head evicting the block it attends to least: q4/hh, "
      "q4/hh=equal, q4/hh@50%)");
}

// --kv-window and --kv-sinks into `window` and `sinks` (-1 when not given), with where their
// defaults come from (e.g. "32" or "the bundle's, or 32").
inline void add_kv_layout_options(CLI::App& app, int* window, int* sinks, const std::string& window_default,
                                  const std::string& sinks_default) {
  app.add_option("--kv-window", *window, "exact recent tokens of a compressed cache (default: " + window_default + ")")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--kv-sinks", *sinks,
                 "sink tokens of a compressed cache, kept exact and never evicted (default: " + sinks_default + ")")
      ->check(CLI::NonNegativeNumber);
}

inline CLI::Option* add_weights_pages_option(CLI::App& app, std::string* pages) {
  return app
      .add_option("--weights-pages", *pages,
                  "the weights' pages: auto (default: the bundle's mapping read in at load, in 2 MB pages where "
                  "the kernel gives the file them, re-reading what the page cache held in 4 KB pages), map (the "
                  "mapping, read on first use in the pages the page cache has), copy (an anonymous copy in 2 MB "
                  "pages: the same bytes, not reclaimable or shared)")
      ->check(CLI::IsMember({"auto", "map", "copy"}));
}

// One line on the weights' pages: "weights: 678.2 of 678.3 MiB in 2 MiB pages, 678.3 MiB resident
// (mapped bundle; pages auto: re-read)", or what is known of them.
inline void print_weights_pages(std::FILE* out, const tern_model* model) {
  tern_weights_pages w;
  if (tern_model_weights_pages(model, &w) != TERN_OK || w.bytes == 0) return;
  const double mib = 1024.0 * 1024.0;
  const char* memory = !w.mapped ? "read into memory" : w.anonymous ? "anonymous copy" : "mapped bundle";
  if (!w.known || w.large_page_bytes == 0) {
    std::fprintf(out, "weights: %.1f MiB (%s), %s (pages %s: %s)\n", w.bytes / mib, memory,
                 w.known ? "no large pages here" : "page size unknown here", w.mode, w.load);
    return;
  }
  std::fprintf(out, "weights: %.1f of %.1f MiB in %.0f MiB pages, %.1f MiB resident (%s; pages %s: %s)\n",
               w.large_bytes / mib, w.bytes / mib, w.large_page_bytes / mib, w.resident_bytes / mib, memory, w.mode,
               w.load);
}

inline CLI::Option* add_verify_bundle_option(CLI::App& app, bool* verify) {
  return app.add_flag("--verify-bundle", *verify,
                      "before loading, read the whole bundle and check it against the checksum tern-convert "
                      "recorded (a damaged bundle fails to load; one without a checksum loads with a note)");
}

// --verify-bundle: TERN_OK when not asked, when the checksum matches, or when the bundle records
// none (a note on stderr then); otherwise the status of tern_bundle_verify (the message names the
// damaged part). `tool` prefixes the notes.
inline tern_status verify_bundle_if_asked(const ModelOptions& o, const char* path, const char* tool) {
  if (!o.verify_bundle) return TERN_OK;
  int recorded = 0;
  const tern_status s = tern_bundle_verify(path, 0, &recorded);
  if (s == TERN_OK) {
    std::fprintf(stderr, "%s: %s: %s\n", tool, path,
                 recorded ? "checksum verified" : "no checksum recorded (converted before checksums were written)");
  }
  return s;
}

// The load parameters the flags ask for, over tern_model_default_params(); kv_mode and
// weights_pages point into `o`. Not TERN_OK: --memory-budget is no size (tern_last_error_message() says why).
inline tern_status to_model_params(const ModelOptions& o, tern_model_params* p) {
  *p = tern_model_default_params();
  const tern_status s = tern_parse_memory_budget(o.memory_budget.c_str(), &p->memory_budget_bytes);
  if (s != TERN_OK) return s;
  p->n_threads = o.threads;
  p->n_ctx = o.ctx;
  p->n_batch = o.batch;
  p->kv_mode = o.kv.c_str();
  p->weights_pages = o.weights_pages.c_str();
  p->kv_sink_tokens = o.kv_sinks;
  p->kv_recent_window = o.kv_window;
  return TERN_OK;
}

}  // namespace tern::cli
