// The tokenizer readers behind import_tokenizer(), one per file format.
#pragma once

#include <string>

#include "converter/ir/model_ir.h"
#include "platform/error.h"

namespace tern::convert {

// A SentencePiece BPE tokenizer.model (read with libsentencepiece).
Result<TokenizerIR> import_sentencepiece_model(const std::string& path);
// A Hugging Face tokenizer.json with a byte-level BPE model; `config_path` is an optional
// tokenizer_config.json for BOS/EOS, add_bos and the chat template ("" when absent).
Result<TokenizerIR> import_tokenizer_json(const std::string& path, const std::string& config_path);
// Applies tokenizer_config.json (BOS/EOS names, add_bos_token, chat_template) to `ir`.
Error apply_tokenizer_config(const std::string& config_path, TokenizerIR* ir);

}  // namespace tern::convert
