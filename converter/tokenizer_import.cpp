#include "converter/tokenizer_import.h"

namespace tern::convert {

Result<TokenizerIR> import_tokenizer(const std::string& path) {
  return fail(Error::NotSupported, "%s: tokenizer import not implemented yet", path.c_str());
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
  return b.Finish();
}

}  // namespace tern::convert
