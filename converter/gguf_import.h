// GGUF checkpoints (llama.cpp arch `bitnet` tq1_0/tq2_0, bitnet.cpp `bitnet-b1.58` i2_s).
#pragma once

#include <string>

#include "converter/convert_options.h"
#include "converter/model_ir.h"
#include "platform/error.h"

namespace tern::convert {

Result<ModelIR> import_gguf(const std::string& path, const ConvertOptions& options);

}  // namespace tern::convert
