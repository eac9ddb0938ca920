#include "converter/tokenizer/tokenizer_host.h"

#include "converter/tokenizer/tokenizer_import.h"
#include "runtime/base/arena.h"
#include "schema/tokenizer_generated.h"

namespace tern::convert {

Result<std::unique_ptr<HostTokenizer>> HostTokenizer::from_ir(const TokenizerIR& ir, const TokenizerOptions& options) {
  auto host = std::unique_ptr<HostTokenizer>(new HostTokenizer());
  host->fbb_.Finish(write_tokenizer(host->fbb_, ir));
  flatbuffers::Verifier verifier(host->fbb_.GetBufferPointer(), host->fbb_.GetSize());
  TERN_CHECK_OR_RETURN(verifier.VerifyBuffer<schema::Tokenizer>(nullptr), Error::Internal,
                       "written tokenizer table does not verify");
  const schema::Tokenizer* table = host->table();
  const size_t bytes = Tokenizer::required_arena_bytes(table, options);
  TERN_CHECK_OR_RETURN(bytes > 0, Error::InvalidBundle, "tokenizer table rejected: %s", last_error_message());
  host->arena_.resize(bytes);
  ArenaAllocator arena(host->arena_.data(), host->arena_.size());
  TERN_ASSIGN_OR_RETURN(host->tokenizer_, Tokenizer::create(table, arena, options));
  return host;
}

Result<std::unique_ptr<HostTokenizer>> HostTokenizer::load(const std::string& path, const TokenizerOptions& options) {
  TERN_ASSIGN_OR_RETURN(TokenizerIR ir, import_tokenizer(path));
  return from_ir(ir, options);
}

const schema::Tokenizer* HostTokenizer::table() const {
  return flatbuffers::GetRoot<schema::Tokenizer>(fbb_.GetBufferPointer());
}

Result<std::vector<int32_t>> HostTokenizer::encode(const std::string& text, bool add_bos, bool parse_special) {
  std::vector<uint8_t> scratch(tokenizer_.encode_scratch_bytes(text.size()));
  std::vector<int32_t> ids(text.size() + 2);
  size_t needed = 0;
  auto n = tokenizer_.encode(text.data(), text.size(), add_bos, parse_special, ids.data(), ids.size(), &needed,
                             scratch.data(), scratch.size());
  if (!n.ok() && n.error() == Error::OutOfRange) {  // byte fallback can give more ids than bytes
    ids.resize(needed);
    n = tokenizer_.encode(text.data(), text.size(), add_bos, parse_special, ids.data(), ids.size(), &needed,
                          scratch.data(), scratch.size());
  }
  if (!n.ok()) return n.error();
  ids.resize(*n);
  return ids;
}

Result<std::string> HostTokenizer::decode(const std::vector<int32_t>& ids) {
  TokenDecoder decoder(tokenizer_);
  std::string text;
  char buf[4096];
  for (int32_t id : ids) {
    TERN_ASSIGN_OR_RETURN(size_t n, decoder.push(id, buf, sizeof buf));
    text.append(buf, n);
  }
  TERN_ASSIGN_OR_RETURN(size_t n, decoder.flush(buf, sizeof buf));
  text.append(buf, n);
  return text;
}

}  // namespace tern::convert
