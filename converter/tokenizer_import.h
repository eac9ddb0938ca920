// Reads tokenizers from checkpoints (Hugging Face tokenizer.json, SentencePiece
// tokenizer.model) and writes them into a bundle.
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <string>

#include "converter/model_ir.h"
#include "platform/error.h"
#include "schema/tokenizer_generated.h"

namespace tern::convert {

// `path` is a tokenizer.json, a SentencePiece .model, or a directory holding one
// (tokenizer.json preferred; tokenizer_config.json read for BOS/EOS/chat template).
Result<TokenizerIR> import_tokenizer(const std::string& path);

flatbuffers::Offset<schema::Tokenizer> write_tokenizer(flatbuffers::FlatBufferBuilder& fbb, const TokenizerIR& ir);

}  // namespace tern::convert
