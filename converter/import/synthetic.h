// Synthetic models: random ternary weights (seeded) with the exact shapes of real
// checkpoints, for size and speed work. Weights are generated tensor by tensor while the
// bundle is written, so even the 2B-4T preset never holds the whole model in memory.
#pragma once

#include <string>

#include "converter/ir/convert_options.h"
#include "converter/ir/model_ir.h"
#include "converter/writer/bundle_writer.h"
#include "platform/error.h"

namespace tern::convert {

// "2b4t", "large", "3b", "tiny"; InvalidArgument for anything else.
Result<ModelConfig> synthetic_config(const std::string& preset);
// 256 single-byte pieces then <|bos|>, <|eos|>, <|eot|>; byte-level BPE without merges.
TokenizerIR synthetic_byte_tokenizer();
Result<BundleContents> synthetic_contents(const std::string& preset, const ConvertOptions& options);

}  // namespace tern::convert
