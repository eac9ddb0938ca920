// Hugging Face config.json parsing: the input becomes config.json of a checkpoint
// directory without weights, so import_hf parses it and stops at the missing weights.
#include <cstddef>
#include <cstdint>

#include "converter/import/hf_import.h"
#include "tests/fuzz/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto& dir = tern::fuzz::ShmDir::get();
  dir.put("config.json", data, size);
  tern::convert::ConvertOptions options;
  options.require_tokenizer = false;
  options.progress = false;
  auto model = tern::convert::import_hf(dir.path(), options);
  (void)model;
  return 0;
}
