// The KV cache layout flags, worded alike in every CLI that runs or plans a compressed cache.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace tern::cli {

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

}  // namespace tern::cli
