// GGUF reader and importer on arbitrary bytes: any input must give a value or an error.
#include <cstddef>
#include <cstdint>

#include "converter/import/gguf.h"
#include "converter/import/gguf_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tern::convert;
  auto file = gguf::File::parse(data, size, "fuzz.gguf");
  if (!file.ok()) return 0;
  ConvertOptions options;
  options.require_tokenizer = false;
  options.progress = false;
  auto model = import_gguf(*file, options);
  (void)model;
  // Decoders run on every tensor, not only on those a valid model reaches.
  for (const auto& t : file->tensors()) {
    auto f = gguf_decode_float(*file, t);
    auto q = gguf_decode_ternary(*file, t);
    (void)f;
    (void)q;
  }
  auto tok = gguf_import_tokenizer(*file);
  (void)tok;
  return 0;
}
