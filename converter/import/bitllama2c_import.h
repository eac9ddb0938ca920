// bitllama2.c `.bin` checkpoints (format: ../shared/models/bitllama2c-3M/README.md).
// The SentencePiece tokenizer.model beside the .bin is imported too.
#pragma once

#include <cstdint>
#include <string>

#include "converter/ir/convert_options.h"
#include "converter/ir/model_ir.h"
#include "platform/error.h"

namespace tern::convert {

inline constexpr uint32_t kBitllama2cMagic = 0x616b3432;
inline constexpr size_t kBitllama2cHeaderSize = 256;

Result<ModelIR> import_bitllama2c(const std::string& path, const ConvertOptions& options);
// The same from bytes in memory (`path` only names the file in messages); no tokenizer.
Result<ModelIR> import_bitllama2c_bytes(const uint8_t* data, size_t size, const std::string& path);

}  // namespace tern::convert
