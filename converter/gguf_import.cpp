#include "converter/gguf_import.h"

namespace tern::convert {

Result<ModelIR> import_gguf(const std::string& path, const ConvertOptions& options) {
  return fail(Error::NotSupported, "%s: GGUF import not implemented yet", path.c_str());
}

}  // namespace tern::convert
