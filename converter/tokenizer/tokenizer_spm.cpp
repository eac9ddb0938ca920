// SentencePiece .model import: pieces, scores and piece types through libsentencepiece;
// the normalizer and trainer flags the library has no accessor for (dummy prefix,
// whitespace handling, byte fallback, model type) read from the serialized ModelProto.
#include <sentencepiece_processor.h>

#include <cstring>
#include <exception>
#include <string>

#include "converter/tokenizer/tokenizer_import.h"
#include "converter/tokenizer/tokenizer_internal.h"

namespace tern::convert {
namespace {

// Just enough of the protobuf wire format to walk ModelProto's fields.
class WireReader {
 public:
  WireReader(const char* data, size_t size) : p_(reinterpret_cast<const uint8_t*>(data)), end_(p_ + size) {}

  bool done() const { return p_ >= end_; }
  // Reads one field; `len_data/len_size` for length-delimited ones, `varint` otherwise.
  bool next(uint32_t* field, uint32_t* wire, uint64_t* varint, const char** len_data, size_t* len_size) {
    uint64_t key;
    if (!read_varint(&key)) return false;
    *field = static_cast<uint32_t>(key >> 3);
    *wire = static_cast<uint32_t>(key & 7);
    switch (*wire) {
      case 0: return read_varint(varint);
      case 1:
        if (end_ - p_ < 8) return false;
        p_ += 8;
        return true;
      case 2: {
        uint64_t n;
        if (!read_varint(&n) || n > static_cast<uint64_t>(end_ - p_)) return false;
        *len_data = reinterpret_cast<const char*>(p_);
        *len_size = n;
        p_ += n;
        return true;
      }
      case 5:
        if (end_ - p_ < 4) return false;
        p_ += 4;
        return true;
      default: return false;
    }
  }

 private:
  bool read_varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64 && p_ < end_; shift += 7) {
      const uint8_t b = *p_++;
      *v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  const uint8_t* p_;
  const uint8_t* end_;
};

struct SpmFlags {
  int model_type = 1;  // UNIGRAM unless stated
  bool byte_fallback = false;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
  bool treat_whitespace_as_suffix = false;
  std::string normalizer_name;
  std::string unk_surface = " \xE2\x81\x87 ";
  size_t charsmap_size = 0;
  std::vector<int> piece_types;  // SentencePiece.Type per piece
};

// One field of a message, as WireReader::next reads it.
struct WireField {
  uint32_t number = 0, wire = 0;
  uint64_t varint = 0;
  const char* data = nullptr;  // length-delimited fields
  size_t size = 0;
};

// Calls visit(field) for every field of the message in data[0, size); false when the bytes
// are not a well-formed message or a visit returns false.
template <class Visit>
bool for_each_field(const char* data, size_t size, Visit visit) {
  WireReader r(data, size);
  while (!r.done()) {
    WireField f;
    if (!r.next(&f.number, &f.wire, &f.varint, &f.data, &f.size) || !visit(f)) return false;
  }
  return true;
}

bool read_flags(const std::string& proto, SpmFlags* flags) {
  return for_each_field(proto.data(), proto.size(), [flags](const WireField& top) {
    if (top.wire != 2) return true;
    if (top.number == 1) {  // SentencePiece { piece = 1; score = 2; type = 3 [default NORMAL] }
      int type = 1;
      const bool ok = for_each_field(top.data, top.size, [&type](const WireField& f) {
        if (f.number == 3 && f.wire == 0) type = static_cast<int>(f.varint);
        return true;
      });
      flags->piece_types.push_back(type);
      return ok;
    }
    if (top.number == 2) {  // TrainerSpec
      return for_each_field(top.data, top.size, [flags](const WireField& f) {
        if (f.number == 44 && f.wire == 2) flags->unk_surface.assign(f.data, f.size);
        if (f.wire != 0) return true;
        if (f.number == 3) flags->model_type = static_cast<int>(f.varint);
        if (f.number == 35) flags->byte_fallback = f.varint != 0;
        if (f.number == 24) flags->treat_whitespace_as_suffix = f.varint != 0;
        return true;
      });
    }
    if (top.number == 3) {  // NormalizerSpec
      return for_each_field(top.data, top.size, [flags](const WireField& f) {
        if (f.number == 1 && f.wire == 2) flags->normalizer_name.assign(f.data, f.size);
        if (f.number == 2 && f.wire == 2) flags->charsmap_size = f.size;
        if (f.number == 3 && f.wire == 0) flags->add_dummy_prefix = f.varint != 0;
        if (f.number == 4 && f.wire == 0) flags->remove_extra_whitespaces = f.varint != 0;
        if (f.number == 5 && f.wire == 0) flags->escape_whitespaces = f.varint != 0;
        return true;
      });
    }
    return true;
  });
}

}  // namespace

Result<TokenizerIR> import_sentencepiece_model(const std::string& path) {
  sentencepiece::SentencePieceProcessor sp;
  // libsentencepiece reports most problems as a status, but its double-array builder
  // (darts-clone) throws on some malformed vocabularies (e.g. an empty piece).
  std::string load_error;
  try {
    const auto status = sp.Load(path);
    if (!status.ok()) load_error = status.ToString();
  } catch (const std::exception& e) {
    load_error = e.what();
  } catch (...) {
    load_error = "unknown exception from libsentencepiece";
  }
  TERN_CHECK_OR_RETURN(load_error.empty(), Error::InvalidArgument, "%s: not a SentencePiece model: %s", path.c_str(),
                       load_error.c_str());
  SpmFlags flags;
  TERN_CHECK_OR_RETURN(read_flags(sp.serialized_model_proto(), &flags), Error::InvalidArgument,
                       "%s: malformed SentencePiece ModelProto", path.c_str());
  // ModelProto.TrainerSpec.model_type: 1 UNIGRAM, 2 BPE (3 WORD and 4 CHAR are not used by LLMs).
  TERN_CHECK_OR_RETURN(flags.model_type == 1 || flags.model_type == 2, Error::NotSupported,
                       "%s: SentencePiece model type %d is not supported (only unigram and BPE)", path.c_str(),
                       flags.model_type);
  TERN_CHECK_OR_RETURN(flags.charsmap_size == 0, Error::NotSupported,
                       "%s: SentencePiece normalizer '%s' with a character map is not supported (only identity)",
                       path.c_str(), flags.normalizer_name.c_str());
  TERN_CHECK_OR_RETURN(flags.escape_whitespaces && !flags.treat_whitespace_as_suffix, Error::NotSupported,
                       "%s: SentencePiece whitespace options not supported", path.c_str());
  const int n = sp.GetPieceSize();
  TERN_CHECK_OR_RETURN(static_cast<int>(flags.piece_types.size()) == n, Error::InvalidArgument,
                       "%s: ModelProto lists %zu pieces, library %d", path.c_str(), flags.piece_types.size(), n);

  TokenizerIR ir;
  ir.type = flags.model_type == 1 ? TokenizerType::SentencePieceUnigram : TokenizerType::SentencePieceBpe;
  ir.pretokenizer = PreTokenizer::None;
  ir.pieces.reserve(n);
  ir.scores.reserve(n);
  ir.attrs.reserve(n);
  for (int id = 0; id < n; ++id) {
    ir.pieces.push_back(sp.IdToPiece(id));
    ir.scores.push_back(sp.GetScore(id));
    TokenAttr attr = TokenAttr::Normal;
    if (sp.IsControl(id)) {
      attr = TokenAttr::Control;
    } else if (sp.IsUnknown(id)) {
      attr = TokenAttr::Unknown;
    } else if (sp.IsByte(id)) {
      attr = TokenAttr::Byte;
    } else if (sp.IsUnused(id)) {
      attr = TokenAttr::Unused;
    } else if (flags.piece_types[id] == 4) {
      attr = TokenAttr::UserDefined;
    }
    ir.attrs.push_back(attr);
  }
  ir.bos_id = sp.bos_id();
  ir.eos_id = sp.eos_id();
  ir.unk_id = sp.unk_id();
  ir.pad_id = sp.pad_id();
  ir.add_bos = ir.bos_id >= 0;
  ir.add_dummy_prefix = flags.add_dummy_prefix;
  ir.remove_extra_whitespaces = flags.remove_extra_whitespaces;
  ir.byte_fallback = flags.byte_fallback;
  ir.unk_surface = flags.unk_surface;
  return ir;
}

}  // namespace tern::convert
