// bitllama2c .bin header and weights.
#include <cstddef>
#include <cstdint>

#include "converter/import/bitllama2c_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto model = tern::convert::import_bitllama2c_bytes(data, size, "fuzz.bin");
  (void)model;
  return 0;
}
