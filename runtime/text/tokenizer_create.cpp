// Building a Tokenizer from the bundle's table: validation and arena layout (plan), then create()'s
// steps, each a builder: the table's fields, piece table, byte pieces, model-specific tables, specials.
#include "runtime/text/piece_table.h"
#include "runtime/text/tokenizer.h"
#include "runtime/text/tokenizer_internal.h"

namespace tern {
using namespace tokenizer_detail;

Error Tokenizer::plan(const schema::Tokenizer* fb, const TokenizerOptions& options, Layout* layout) {
  TERN_CHECK_OR_RETURN(fb != nullptr, Error::InvalidArgument, "tokenizer table is null");
  const auto* offsets = fb->piece_offsets();
  const auto* bytes = fb->piece_bytes();
  TERN_CHECK_OR_RETURN(offsets != nullptr && bytes != nullptr && offsets->size() >= 2, Error::InvalidBundle,
                       "tokenizer has no pieces");
  const uint32_t vocab = offsets->size() - 1;
  TERN_CHECK_OR_RETURN(vocab < (1u << 30), Error::InvalidBundle, "tokenizer vocabulary of %u pieces is too large",
                       vocab);
  TERN_CHECK_OR_RETURN(offsets->Get(0) == 0 && offsets->Get(vocab) == bytes->size(), Error::InvalidBundle,
                       "tokenizer piece offsets do not cover piece_bytes");
  for (uint32_t i = 0; i < vocab; ++i) {
    TERN_CHECK_OR_RETURN(offsets->Get(i) <= offsets->Get(i + 1), Error::InvalidBundle,
                         "tokenizer piece offsets decrease at piece %u", i);
    TERN_CHECK_OR_RETURN(offsets->Get(i + 1) - offsets->Get(i) <= kMaxPieceBytes, Error::InvalidBundle,
                         "tokenizer piece %u is longer than %zu bytes", i, kMaxPieceBytes);
  }
  TERN_CHECK_OR_RETURN(fb->attrs() != nullptr && fb->attrs()->size() == vocab, Error::InvalidBundle,
                       "tokenizer has %u attrs for %u pieces", fb->attrs() ? fb->attrs()->size() : 0u, vocab);
  const auto type = fb->type();
  TERN_CHECK_OR_RETURN(type == schema::TokenizerType::ByteLevelBpe || type == schema::TokenizerType::SentencePieceBpe ||
                           type == schema::TokenizerType::SentencePieceUnigram,
                       Error::NotSupported, "tokenizer type %d is not supported", static_cast<int>(type));
  const uint32_t merges = fb->merges() ? fb->merges()->size() / 2 : 0;
  // SentencePiece pieces carry scores, unless BPE merges by rank (Gemma's tokenizer.json).
  if (type != schema::TokenizerType::ByteLevelBpe && !(type == schema::TokenizerType::SentencePieceBpe && merges > 0)) {
    TERN_CHECK_OR_RETURN(fb->scores() != nullptr && fb->scores()->size() == vocab, Error::InvalidBundle,
                         "SentencePiece tokenizer needs one score per piece (or BPE merges)");
  }
  TERN_CHECK_OR_RETURN(static_cast<uint32_t>(fb->normalizer()) <= static_cast<uint32_t>(schema::Normalizer::MAX),
                       Error::NotSupported, "tokenizer normalizer %d is not supported",
                       static_cast<int>(fb->normalizer()));
  TERN_CHECK_OR_RETURN(!fb->unk_surface() || fb->unk_surface()->size() <= kMaxUnknownSurface, Error::InvalidBundle,
                       "tokenizer unk_surface is longer than %zu bytes", kMaxUnknownSurface);
  TERN_CHECK_OR_RETURN(!fb->merges() || fb->merges()->size() % 2 == 0, Error::InvalidBundle,
                       "tokenizer merges hold an odd number of ids");
  uint32_t specials = 0;
  for (uint32_t i = 0; i < vocab; ++i) {
    const uint8_t a = fb->attrs()->Get(i);
    if ((a == kAttrControl || a == kAttrUserDefined) && offsets->Get(i + 1) > offsets->Get(i)) ++specials;
  }
  layout->vocab = vocab;
  layout->piece_capacity = table_capacity(vocab);
  layout->merge_capacity = type == schema::TokenizerType::ByteLevelBpe || merges > 0 ? table_capacity(merges) : 0;
  layout->specials = specials;
  layout->scratch_bytes = Scratch::required(options.max_run_bytes);
  // Each allocation may need up to 63 bytes of alignment padding.
  layout->total = align_up(layout->piece_capacity * sizeof(int32_t), 64) +
                  align_up(layout->merge_capacity * sizeof(MergeEntry), 64) + align_up(specials * sizeof(Special), 64) +
                  align_up(layout->scratch_bytes, 64) + 4 * 64;
  return Error::Ok;
}

size_t Tokenizer::required_arena_bytes(const schema::Tokenizer* tokenizer, const TokenizerOptions& options) {
  Layout layout;
  if (plan(tokenizer, options, &layout) != Error::Ok) return 0;
  return layout.total;
}

Result<Tokenizer> Tokenizer::create(const schema::Tokenizer* fb, ArenaAllocator& arena,
                                    const TokenizerOptions& options) {
  Layout layout;
  TERN_RETURN_IF_ERROR(plan(fb, options, &layout));
  Tokenizer t;
  t.read_table(fb, layout.vocab);
  TERN_RETURN_IF_ERROR(t.build_piece_table(arena, layout.piece_capacity));
  TERN_RETURN_IF_ERROR(t.map_bytes());
  if (t.kind_ == TokenizerKind::SentencePieceUnigram) TERN_RETURN_IF_ERROR(t.prepare_unigram());
  if (layout.merge_capacity > 0) TERN_RETURN_IF_ERROR(t.build_merge_table(arena, layout.merge_capacity));
  if (layout.specials > 0) TERN_RETURN_IF_ERROR(t.build_specials(arena, layout.specials));
  t.spm_ranked_ = t.kind_ == TokenizerKind::SentencePieceBpe && t.merge_table_ != nullptr;
  t.nfc_ = fb->normalizer() == schema::Normalizer::Nfc;
  t.max_digits_ = fb->pretokenizer() == schema::PreTokenizer::Qwen2 ? 1 : 3;
  if (t.spm_ranked_) {
    t.find_merge_glue();
  } else if (t.is_sentencepiece()) {
    t.check_word_split();
  }
  TERN_ASSIGN_OR_RETURN(t.scratch_, arena.allocate_array<uint8_t>(layout.scratch_bytes, ArenaPurpose::Tokenizer, 64));
  t.scratch_bytes_ = layout.scratch_bytes;
  return t;
}

void Tokenizer::read_table(const schema::Tokenizer* fb, uint32_t vocab) {
  fb_ = fb;
  kind_ = static_cast<TokenizerKind>(fb->type());
  vocab_size_ = static_cast<int32_t>(vocab);
  auto valid_id = [&](int32_t id) { return id >= 0 && id < vocab_size_ ? id : -1; };
  bos_id_ = valid_id(fb->bos_id());
  eos_id_ = valid_id(fb->eos_id());
  eot_id_ = valid_id(fb->eot_id());
  unk_id_ = valid_id(fb->unk_id());
  add_bos_ = fb->add_bos();
  add_dummy_prefix_ = fb->add_dummy_prefix();
  remove_extra_whitespaces_ = fb->remove_extra_whitespaces();
  byte_fallback_ = fb->byte_fallback();
  ignore_merges_ = fb->ignore_merges();
  piece_bytes_ = fb->piece_bytes()->data();
  piece_offsets_ = fb->piece_offsets()->data();
  scores_ = fb->scores() && fb->scores()->size() == vocab ? fb->scores()->data() : nullptr;
  attrs_ = fb->attrs()->data();
  if (fb->unk_surface() != nullptr) {
    unk_surface_ = fb->unk_surface()->c_str();
    unk_surface_size_ = fb->unk_surface()->size();
  }
}

Error Tokenizer::map_bytes() {
  // Bytes -> tokens: the single-byte pieces, or SentencePiece's <0xXX> pieces.
  for (int b = 0; b < 256; ++b) {
    if (kind_ == TokenizerKind::ByteLevelBpe) {
      const uint8_t byte = static_cast<uint8_t>(b);
      byte_ids_[b] = find_piece(reinterpret_cast<const char*>(&byte), 1);
    } else {
      static const char kHex[] = "0123456789ABCDEF";
      const char name[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
      byte_ids_[b] = find_piece(name, 6);
    }
  }
  if (kind_ == TokenizerKind::ByteLevelBpe) {
    for (int b = 0; b < 256; ++b) {
      TERN_CHECK_OR_RETURN(byte_ids_[b] >= 0, Error::InvalidBundle, "byte-level tokenizer has no piece for byte 0x%02X",
                           b);
    }
  } else if (byte_fallback_) {
    for (int b = 0; b < 256; ++b) {
      TERN_CHECK_OR_RETURN(byte_ids_[b] >= 0, Error::InvalidBundle, "byte-fallback tokenizer lacks piece <0x%02X>", b);
    }
  }
  // Without byte pieces, what the vocabulary lacks becomes <unk>.
  if (kind_ == TokenizerKind::SentencePieceBpe && !byte_fallback_) {
    TERN_CHECK_OR_RETURN(unk_id_ >= 0, Error::InvalidBundle,
                         "SentencePiece tokenizer without byte fallback needs unk_id");
  }
  return Error::Ok;
}

}  // namespace tern
