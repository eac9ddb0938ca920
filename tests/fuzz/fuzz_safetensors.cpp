// safetensors header parser (and float reads of what it accepts).
#include <cstddef>
#include <cstdint>

#include "converter/import/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tern::convert;
  auto file = SafetensorsFile::parse(data, size, "fuzz.safetensors");
  if (!file.ok()) return 0;
  for (const auto& [name, t] : file->tensors()) {
    if (t.size <= (1u << 20)) {
      auto values = file->read_float(t);
      (void)values;
    }
  }
  return 0;
}
