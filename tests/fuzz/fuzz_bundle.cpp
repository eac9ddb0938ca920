// The bundle loader: identifier, version, FlatBuffers verifier and every offset/size
// checked before use.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "runtime/model/bundle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A mapped bundle starts page-aligned; give the loader the same 64-byte alignment.
  void* aligned = nullptr;
  if (posix_memalign(&aligned, 64, size == 0 ? 1 : size) != 0) return 0;
  if (size != 0) std::memcpy(aligned, data, size);
  {
    auto bundle = tern::Bundle::from_memory(static_cast<const uint8_t*>(aligned), size);
    (void)bundle;
  }
  std::free(aligned);
  return 0;
}
