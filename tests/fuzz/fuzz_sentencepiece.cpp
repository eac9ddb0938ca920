// SentencePiece .model import (protobuf parsed by libsentencepiece).
#include <cstddef>
#include <cstdint>

#include "converter/tokenizer/tokenizer_import.h"
#include "tests/fuzz/fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tern::fuzz::ShmDir::get().put("tokenizer.model", data, size);
  auto tok = tern::convert::import_tokenizer(path);
  (void)tok;
  return 0;
}
