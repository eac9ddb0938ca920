// Picks the importer for a checkpoint path: a Hugging Face directory (or its
// config.json / model.safetensors), a GGUF file, or a bitllama2c .bin.
#pragma once

#include <string>

#include "converter/ir/convert_options.h"
#include "converter/ir/model_ir.h"
#include "platform/error.h"

namespace tern::convert {

enum class InputFormat { Unknown, HuggingFace, Gguf, Bitllama2c };
const char* to_string(InputFormat f);

// From the path and the file's first bytes; Unknown when nothing matches.
InputFormat detect_format(const std::string& path);
Result<ModelIR> import_model(const std::string& path, const ConvertOptions& options);

}  // namespace tern::convert
