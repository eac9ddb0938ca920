// The bundles the model-backed fuzz targets load once, converted by .ci/fuzz from the
// repository's own models into $TERN_FUZZ_BUNDLE_DIR. A missing one aborts the target: a
// fuzzer that cannot load its model must not count as having run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "include/tern.h"

namespace tern::fuzz {

// The bundles, by what they are (names .ci/fuzz gives them).
constexpr const char* kPlainBundle = "tiny-austen.tern";      // no chat template: the plain format
constexpr const char* kChatBundle = "tiny-austen-chat.tern";  // BitNet 2B-4T's chat template
constexpr const char* kLlama3Bundle = "tiny-llama3.tern";     // LLaMA-3's 128k vocabulary (128-byte pieces)

// The KV modes a session state is fuzzed in: each cache's own state layout (dense f32 and
// fp16; compressed, evicting; per-head budgets; aging tiers). The state's selector byte picks one.
struct StateMode {
  const char* kv_mode;
  uint32_t context;
};
constexpr StateMode kStateModes[] = {
    {"f32", 16}, {"fp16", 16}, {"q4", 132}, {"q4/hh=equal", 132}, {"q3>2@50%", 196},
};
constexpr size_t kStateModeCount = sizeof(kStateModes) / sizeof(kStateModes[0]);

inline std::string bundle_path(const char* name) {
  const char* dir = std::getenv("TERN_FUZZ_BUNDLE_DIR");
  if (dir == nullptr) {
    std::fprintf(stderr, "fuzz: set TERN_FUZZ_BUNDLE_DIR to the bundles .ci/fuzz converts\n");
    std::abort();
  }
  return std::string(dir) + "/" + name;
}

// Loads a bundle (never freed: the target runs until the process ends).
inline tern_model* load_model(const char* name, const char* kv_mode = "f32", uint32_t context = 64) {
  tern_set_log_level(TERN_LOG_OFF);
  tern_model_params p = tern_model_default_params();
  p.kv_mode = kv_mode;
  p.n_ctx = context;
  p.n_threads = 1;
  tern_model* model = nullptr;
  const std::string path = bundle_path(name);
  if (tern_model_load(path.c_str(), &p, &model) != TERN_OK) {
    std::fprintf(stderr, "fuzz: cannot load %s (%s): %s\n", path.c_str(), kv_mode, tern_last_error_message());
    std::abort();
  }
  return model;
}

}  // namespace tern::fuzz
