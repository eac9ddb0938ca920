// Reads tokenizers from checkpoints (Hugging Face tokenizer.json, SentencePiece
// tokenizer.model) and writes them into a bundle.
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <string>

#include "converter/ir/convert_options.h"
#include "converter/ir/model_ir.h"
#include "platform/error.h"
#include "schema/tokenizer_generated.h"

namespace tern::convert {

// `path` is a tokenizer.json, a SentencePiece .model, or a directory holding one
// (tokenizer.json preferred; tokenizer_config.json read for BOS/EOS/chat template).
Result<TokenizerIR> import_tokenizer(const std::string& path);

// An importer's tokenizer from `path` into *out: true when there is one. Without one, the
// error when options.require_tokenizer, else a warning naming `checkpoint` (the bundle will
// not run) and false.
Result<bool> import_checkpoint_tokenizer(const std::string& path, const ConvertOptions& options,
                                         const std::string& checkpoint, TokenizerIR* out);

flatbuffers::Offset<schema::Tokenizer> write_tokenizer(flatbuffers::FlatBufferBuilder& fbb, const TokenizerIR& ir);

}  // namespace tern::convert
