#include "converter/tokenizer/tokenizer_import.h"

#include "converter/tokenizer/chat_format.h"

#include <sys/stat.h>

#include <cstdio>

#include "converter/tokenizer/tokenizer_internal.h"

namespace tern::convert {
namespace {

bool is_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
bool is_dir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool ends_with(const std::string& s, const char* suffix) {
  const std::string t(suffix);
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}
std::string dir_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

Result<TokenizerIR> import_tokenizer(const std::string& path) {
  std::string json_path, model_path, config_path;
  if (is_dir(path)) {
    if (is_file(path + "/tokenizer.json")) json_path = path + "/tokenizer.json";
    if (is_file(path + "/tokenizer.model")) model_path = path + "/tokenizer.model";
    TERN_CHECK_OR_RETURN(!json_path.empty() || !model_path.empty(), Error::FileNotFound,
                         "%s: no tokenizer.json or tokenizer.model in the directory", path.c_str());
    if (is_file(path + "/tokenizer_config.json")) config_path = path + "/tokenizer_config.json";
  } else {
    TERN_CHECK_OR_RETURN(is_file(path), Error::FileNotFound, "%s: no such tokenizer file", path.c_str());
    if (ends_with(path, ".json")) {
      json_path = path;
    } else {
      model_path = path;
    }
    const std::string config = dir_of(path) + "/tokenizer_config.json";
    if (is_file(config) && config != path) config_path = config;
  }
  if (!json_path.empty()) {
    auto ir = import_tokenizer_json(json_path, config_path);
    // A SentencePiece-style tokenizer.json next to its tokenizer.model: use the model.
    const bool spm_style = ir.ok() && ir->type == TokenizerType::SentencePieceBpe;
    if ((ir.ok() && !(spm_style && !model_path.empty())) || model_path.empty() ||
        (!ir.ok() && ir.error() != Error::NotSupported)) {
      return ir;
    }
  }
  TERN_ASSIGN_OR_RETURN(TokenizerIR ir, import_sentencepiece_model(model_path));
  if (!config_path.empty()) {
    TERN_RETURN_IF_ERROR(apply_tokenizer_config(config_path, &ir));
  }
  return ir;
}

Result<bool> import_checkpoint_tokenizer(const std::string& path, const ConvertOptions& options,
                                         const std::string& checkpoint, TokenizerIR* out) {
  auto tok = import_tokenizer(path);
  if (tok.ok()) {
    *out = std::move(tok).value();
    return true;
  }
  if (options.require_tokenizer) return tok.error();
  std::fprintf(stderr, "warning: %s: no tokenizer (%s); the bundle will not run\n", checkpoint.c_str(),
               last_error_message());
  return false;
}

flatbuffers::Offset<schema::Tokenizer> write_tokenizer(flatbuffers::FlatBufferBuilder& fbb, const TokenizerIR& ir) {
  std::vector<uint8_t> bytes;
  std::vector<uint32_t> offsets;
  offsets.reserve(ir.pieces.size() + 1);
  offsets.push_back(0);
  for (const auto& p : ir.pieces) {
    bytes.insert(bytes.end(), p.begin(), p.end());
    offsets.push_back(static_cast<uint32_t>(bytes.size()));
  }
  std::vector<uint8_t> attrs;
  attrs.reserve(ir.attrs.size());
  for (auto a : ir.attrs) attrs.push_back(static_cast<uint8_t>(a));
  std::vector<uint32_t> merges;
  merges.reserve(ir.merges.size() * 2);
  for (const auto& m : ir.merges) {
    merges.push_back(m.first);
    merges.push_back(m.second);
  }
  auto piece_bytes = fbb.CreateVector(bytes);
  auto piece_offsets = fbb.CreateVector(offsets);
  auto scores = fbb.CreateVector(ir.scores);
  auto attrs_vec = fbb.CreateVector(attrs);
  auto merges_vec = fbb.CreateVector(merges);
  auto chat = fbb.CreateString(ir.chat_template);
  auto unk_surface = ir.unk_surface.empty() ? 0 : fbb.CreateString(ir.unk_surface);
  const ChatFormatIR cf = derive_chat_format(ir.chat_template, ir.add_bos && ir.bos_id >= 0);
  auto chat_format = schema::CreateChatFormatDirect(
      fbb, cf.name.c_str(), cf.bos_first, cf.message_prefix.c_str(), cf.message_suffix.c_str(), cf.trim_content,
      cf.generation_prefix.c_str(), cf.generation_always, cf.stop.empty() ? nullptr : cf.stop.c_str());
  schema::TokenizerBuilder b(fbb);
  b.add_type(static_cast<schema::TokenizerType>(ir.type));
  b.add_pretokenizer(static_cast<schema::PreTokenizer>(ir.pretokenizer));
  b.add_piece_bytes(piece_bytes);
  b.add_piece_offsets(piece_offsets);
  b.add_scores(scores);
  b.add_attrs(attrs_vec);
  b.add_merges(merges_vec);
  b.add_bos_id(ir.bos_id);
  b.add_eos_id(ir.eos_id);
  b.add_eot_id(ir.eot_id);
  b.add_unk_id(ir.unk_id);
  b.add_pad_id(ir.pad_id);
  b.add_add_bos(ir.add_bos);
  b.add_add_dummy_prefix(ir.add_dummy_prefix);
  b.add_byte_fallback(ir.byte_fallback);
  b.add_ignore_merges(ir.ignore_merges);
  b.add_chat_template(chat);
  b.add_remove_extra_whitespaces(ir.remove_extra_whitespaces);
  if (!ir.unk_surface.empty()) b.add_unk_surface(unk_surface);
  b.add_chat_format(chat_format);
  b.add_normalizer(ir.nfc ? schema::Normalizer::Nfc : schema::Normalizer::None);
  return b.Finish();
}

}  // namespace tern::convert
