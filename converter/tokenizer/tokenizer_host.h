// Host convenience: a runtime Tokenizer built from a tokenizer file through the same path
// a bundle takes (import -> FlatBuffer -> schema::Tokenizer -> runtime tables), owning
// its buffers. For CLIs and tests; the device gets its tokenizer from the bundle.
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <memory>
#include <string>
#include <vector>

#include "converter/ir/model_ir.h"
#include "platform/error.h"
#include "runtime/text/tokenizer.h"

namespace tern::convert {

class HostTokenizer {
 public:
  static Result<std::unique_ptr<HostTokenizer>> from_ir(const TokenizerIR& ir, const TokenizerOptions& options = {});
  static Result<std::unique_ptr<HostTokenizer>> load(const std::string& path, const TokenizerOptions& options = {});

  Tokenizer& tokenizer() { return tokenizer_; }
  const schema::Tokenizer* table() const;
  size_t arena_bytes() const { return arena_.size(); }

  // Encodes with a heap scratch buffer sized for the text (host only).
  Result<std::vector<int32_t>> encode(const std::string& text, bool add_bos = false, bool parse_special = false);
  // Decodes through the streaming TokenDecoder.
  Result<std::string> decode(const std::vector<int32_t>& ids);

 private:
  flatbuffers::FlatBufferBuilder fbb_;
  std::vector<uint8_t> arena_;
  Tokenizer tokenizer_;
};

}  // namespace tern::convert
