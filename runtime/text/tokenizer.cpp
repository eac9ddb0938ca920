#include "runtime/text/tokenizer.h"

#include <algorithm>
#include <cfloat>
#include <cstring>

#include "runtime/base/hash.h"
#include "runtime/text/unicode.h"
#include "schema/tokenizer_generated.h"

namespace tern {
namespace {

constexpr uint8_t kAttrNormal = static_cast<uint8_t>(schema::TokenAttr::Normal);
constexpr uint8_t kAttrControl = static_cast<uint8_t>(schema::TokenAttr::Control);
constexpr uint8_t kAttrByte = static_cast<uint8_t>(schema::TokenAttr::Byte);
constexpr uint8_t kAttrUnknown = static_cast<uint8_t>(schema::TokenAttr::Unknown);
constexpr uint8_t kAttrUserDefined = static_cast<uint8_t>(schema::TokenAttr::UserDefined);
constexpr uint8_t kAttrUnused = static_cast<uint8_t>(schema::TokenAttr::Unused);

constexpr uint8_t kSpaceMark[3] = {0xE2, 0x96, 0x81};     // U+2581, SentencePiece's space
constexpr uint8_t kReplacement[3] = {0xEF, 0xBF, 0xBD};   // U+FFFD
// Longest piece accepted; lets the decoder and the merge builder work in stack buffers.
constexpr size_t kMaxPieceBytes = 1024;
constexpr size_t kMaxUnknownSurface = 64;

// Scratch cost per byte of a run: the run itself (after U+FFFD replacement), one symbol
// (12 or 16 bytes) and up to three queued pairs of 16 bytes (one per initial pair, two
// per merge).
constexpr size_t kScratchPerByte = 1 + 16 + 3 * 16;
constexpr size_t kScratchSlack = 256;

// FNV-1a, folded so the table's low bits see the high ones (the unigram lattice extends a
// prefix's hash by a byte, fnv1a_step, and folds each).
inline uint64_t fnv_finish(uint64_t h) { return h ^ (h >> 29); }

uint64_t hash_bytes(const uint8_t* p, size_t n) { return fnv_finish(fnv1a(p, n)); }

uint64_t hash_pair(uint32_t a, uint32_t b) {
  uint64_t x = (static_cast<uint64_t>(a) << 32) | b;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

// Open addressing with linear probing, kept at most 2/3 full.
uint32_t table_capacity(size_t entries) {
  size_t cap = 16;
  while (cap < entries + entries / 2) cap <<= 1;
  return static_cast<uint32_t>(cap);
}

bool is_ascii_ci(uint32_t cp, char lower) { return cp == static_cast<uint32_t>(lower) || cp == static_cast<uint32_t>(lower - 32); }

struct QueuedPair {
  float key;       // higher merges first: SentencePiece score, or -rank for BPE
  uint32_t left;   // symbol index; ties merge the leftmost pair first
  uint32_t right;
  int32_t aux;     // BPE: merged id; SentencePiece: merged length in bytes
};

bool before(const QueuedPair& a, const QueuedPair& b) {
  if (a.key != b.key) return a.key > b.key;
  return a.left < b.left;
}

// A binary heap over a caller-provided array.
struct PairQueue {
  QueuedPair* items;
  size_t size = 0;
  size_t capacity;

  void push(const QueuedPair& p) {
    size_t i = size++;
    items[i] = p;
    while (i > 0) {
      size_t parent = (i - 1) / 2;
      if (!before(items[i], items[parent])) break;
      std::swap(items[i], items[parent]);
      i = parent;
    }
  }
  QueuedPair pop() {
    QueuedPair top = items[0];
    items[0] = items[--size];
    size_t i = 0;
    for (;;) {
      size_t l = 2 * i + 1, r = l + 1, best = i;
      if (l < size && before(items[l], items[best])) best = l;
      if (r < size && before(items[r], items[best])) best = r;
      if (best == i) break;
      std::swap(items[i], items[best]);
      i = best;
    }
    return top;
  }
};

// Appends the UTF-8 character at `text` (U+FFFD in place of an invalid sequence) to out at
// *size; returns how many bytes of `text` it took.
size_t append_char_or_replacement(const uint8_t* text, size_t avail, uint8_t* out, size_t* size) {
  const unicode::Decoded d = unicode::decode_utf8(text, avail);
  if (d.valid) {
    std::memcpy(out + *size, text, d.length);
    *size += d.length;
  } else {
    std::memcpy(out + *size, kReplacement, 3);
    *size += 3;
  }
  return d.length;
}

struct BpeSymbol {
  int32_t prev, next, id;  // id -1: merged into its left neighbour
};

// Merges neighbouring symbols of sym[0..n) (linked by prev/next from 0) by rank, lowest
// first and leftmost among equals, until no neighbours have a merge: Hugging Face BPE.
// lookup(left, right, &rank) gives the merged id or -1. `items` holds 3 * n pairs.
template <typename Lookup>
void merge_by_rank(BpeSymbol* sym, size_t n, QueuedPair* items, Lookup lookup) {
  PairQueue queue{items, 0, 3 * n};
  auto try_pair = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    uint32_t rank = 0;
    const int32_t merged = lookup(sym[l].id, sym[r].id, &rank);
    if (merged >= 0) queue.push({-static_cast<float>(rank), static_cast<uint32_t>(l), static_cast<uint32_t>(r), merged});
  };
  for (int32_t i = 0; i >= 0 && sym[i].next >= 0; i = sym[i].next) try_pair(i, sym[i].next);
  while (queue.size > 0) {
    const QueuedPair p = queue.pop();
    BpeSymbol& l = sym[p.left];
    if (l.id < 0 || l.next != static_cast<int32_t>(p.right) || sym[p.right].id < 0) continue;
    uint32_t rank = 0;
    if (lookup(l.id, sym[p.right].id, &rank) != p.aux) continue;  // a neighbour changed since
    l.id = p.aux;
    sym[p.right].id = -1;
    l.next = sym[p.right].next;
    if (l.next >= 0) sym[l.next].prev = static_cast<int32_t>(p.left);
    try_pair(l.prev, static_cast<int32_t>(p.left));
    try_pair(static_cast<int32_t>(p.left), l.next);
  }
}
struct SpmSymbol {
  int32_t prev, next;
  uint32_t start, size;  // size 0: merged into its left neighbour
};
// The best segmentation of a word's first `end` bytes ends with the piece `id` starting at
// `start` (-1: not reached yet); `link` is filled on the way back (the next piece's end).
struct UnigramNode {
  float score;
  int32_t start, id, link;
};
// libsentencepiece's penalty for an unknown character, below the least-probable piece.
constexpr float kUnigramUnknownPenalty = 10.0f;

}  // namespace

struct Tokenizer::MergeEntry {
  int32_t left;  // -1: empty slot
  int32_t right;
  uint32_t rank;
  int32_t merged;
};

struct Tokenizer::Special {
  int32_t id;
  uint32_t offset;
  uint32_t size;
  bool always;  // user-defined pieces are matched even without parse_special
};

struct Tokenizer::Layout {
  uint32_t vocab = 0;
  uint32_t piece_capacity = 0;
  uint32_t merge_capacity = 0;
  uint32_t specials = 0;
  size_t scratch_bytes = 0;
  size_t total = 0;
};

// A run's working memory carved out of one buffer.
class Tokenizer::Scratch {
 public:
  Scratch(uint8_t* base, size_t bytes) : base_(base), bytes_(bytes) {}
  // Room for a run of `run_bytes` bytes (after U+FFFD replacement)?
  bool fits(size_t run_bytes) const { return required(run_bytes) <= bytes_; }
  static size_t required(size_t run_bytes) { return run_bytes * kScratchPerByte + kScratchSlack; }
  uint8_t* run_buffer() const { return base_; }
  // Symbols and queue for a run of n bytes, placed after the run buffer.
  template <typename Symbol>
  Symbol* symbols(size_t n) const {
    return reinterpret_cast<Symbol*>(base_ + align_up(n, 16));
  }
  QueuedPair* queue(size_t n) const { return reinterpret_cast<QueuedPair*>(base_ + align_up(n, 16) + align_up(n * 16, 16)); }
  bool prev_unknown = false;  // SentencePiece merges runs of unknown pieces into one <unk>
  size_t bytes() const { return bytes_; }
  // The last `n` bytes (16-aligned) for the rest of this call; null when they do not fit.
  uint8_t* take_tail(size_t n) {
    const size_t aligned = align_up(n, 16);
    if (aligned + 16 > bytes_) return nullptr;
    bytes_ = (bytes_ - aligned) / 16 * 16;
    return base_ + bytes_;
  }
  // Unigram: the best path's score where the previous word ended. libsentencepiece runs one
  // Viterbi over the whole text in float; carrying the score makes each word's comparisons
  // round exactly as they do there.
  float unigram_score = 0;

 private:
  uint8_t* base_;
  size_t bytes_;
};

Error Tokenizer::plan(const schema::Tokenizer* fb, const TokenizerOptions& options, Layout* layout) {
  TERN_CHECK_OR_RETURN(fb != nullptr, Error::InvalidArgument, "tokenizer table is null");
  const auto* offsets = fb->piece_offsets();
  const auto* bytes = fb->piece_bytes();
  TERN_CHECK_OR_RETURN(offsets != nullptr && bytes != nullptr && offsets->size() >= 2, Error::InvalidBundle,
                       "tokenizer has no pieces");
  const uint32_t vocab = offsets->size() - 1;
  TERN_CHECK_OR_RETURN(vocab < (1u << 30), Error::InvalidBundle, "tokenizer vocabulary of %u pieces is too large", vocab);
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
  layout->merge_capacity =
      type == schema::TokenizerType::ByteLevelBpe || merges > 0 ? table_capacity(merges) : 0;
  layout->specials = specials;
  layout->scratch_bytes = Scratch::required(options.max_run_bytes);
  // Each allocation may need up to 63 bytes of alignment padding.
  layout->total = align_up(layout->piece_capacity * sizeof(int32_t), 64) +
                  align_up(layout->merge_capacity * sizeof(MergeEntry), 64) +
                  align_up(specials * sizeof(Special), 64) + align_up(layout->scratch_bytes, 64) + 4 * 64;
  return Error::Ok;
}

size_t Tokenizer::required_arena_bytes(const schema::Tokenizer* tokenizer, const TokenizerOptions& options) {
  Layout layout;
  if (plan(tokenizer, options, &layout) != Error::Ok) return 0;
  return layout.total;
}

Result<Tokenizer> Tokenizer::create(const schema::Tokenizer* fb, ArenaAllocator& arena, const TokenizerOptions& options) {
  Layout layout;
  TERN_RETURN_IF_ERROR(plan(fb, options, &layout));
  Tokenizer t;
  t.fb_ = fb;
  t.kind_ = static_cast<TokenizerKind>(fb->type());
  t.vocab_size_ = static_cast<int32_t>(layout.vocab);
  auto valid_id = [&](int32_t id) { return id >= 0 && id < t.vocab_size_ ? id : -1; };
  t.bos_id_ = valid_id(fb->bos_id());
  t.eos_id_ = valid_id(fb->eos_id());
  t.eot_id_ = valid_id(fb->eot_id());
  t.unk_id_ = valid_id(fb->unk_id());
  t.add_bos_ = fb->add_bos();
  t.add_dummy_prefix_ = fb->add_dummy_prefix();
  t.remove_extra_whitespaces_ = fb->remove_extra_whitespaces();
  t.byte_fallback_ = fb->byte_fallback();
  t.ignore_merges_ = fb->ignore_merges();
  t.piece_bytes_ = fb->piece_bytes()->data();
  t.piece_offsets_ = fb->piece_offsets()->data();
  t.scores_ = fb->scores() && fb->scores()->size() == layout.vocab ? fb->scores()->data() : nullptr;
  t.attrs_ = fb->attrs()->data();
  if (fb->unk_surface() != nullptr) {
    t.unk_surface_ = fb->unk_surface()->c_str();
    t.unk_surface_size_ = fb->unk_surface()->size();
  }

  // piece bytes -> id; the first of duplicate pieces wins.
  TERN_ASSIGN_OR_RETURN(int32_t* pieces, arena.allocate_array<int32_t>(layout.piece_capacity, ArenaPurpose::Tokenizer, 64));
  std::fill(pieces, pieces + layout.piece_capacity, -1);
  t.piece_table_ = pieces;
  t.piece_table_mask_ = layout.piece_capacity - 1;
  for (int32_t id = 0; id < t.vocab_size_; ++id) {
    const PieceView p = t.piece(id);
    uint32_t slot = static_cast<uint32_t>(hash_bytes(reinterpret_cast<const uint8_t*>(p.data), p.size)) & t.piece_table_mask_;
    bool duplicate = false;
    while (pieces[slot] >= 0) {
      const PieceView q = t.piece(pieces[slot]);
      if (q.size == p.size && std::memcmp(q.data, p.data, p.size) == 0) {
        duplicate = true;
        break;
      }
      slot = (slot + 1) & t.piece_table_mask_;
    }
    if (!duplicate) pieces[slot] = id;
  }

  // Bytes -> tokens: the single-byte pieces, or SentencePiece's <0xXX> pieces.
  for (int b = 0; b < 256; ++b) {
    if (t.kind_ == TokenizerKind::ByteLevelBpe) {
      const uint8_t byte = static_cast<uint8_t>(b);
      t.byte_ids_[b] = t.find_piece(reinterpret_cast<const char*>(&byte), 1);
    } else {
      static const char kHex[] = "0123456789ABCDEF";
      const char name[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
      t.byte_ids_[b] = t.find_piece(name, 6);
    }
  }
  if (t.kind_ == TokenizerKind::ByteLevelBpe) {
    for (int b = 0; b < 256; ++b) {
      TERN_CHECK_OR_RETURN(t.byte_ids_[b] >= 0, Error::InvalidBundle, "byte-level tokenizer has no piece for byte 0x%02X", b);
    }
  } else if (t.byte_fallback_) {
    for (int b = 0; b < 256; ++b) {
      TERN_CHECK_OR_RETURN(t.byte_ids_[b] >= 0, Error::InvalidBundle, "byte-fallback tokenizer lacks piece <0x%02X>", b);
    }
  }
  if (t.kind_ == TokenizerKind::SentencePieceBpe && !t.byte_fallback_) {
    TERN_CHECK_OR_RETURN(t.unk_id_ >= 0, Error::InvalidBundle, "SentencePiece tokenizer without byte fallback needs unk_id");
  }
  if (t.kind_ == TokenizerKind::SentencePieceUnigram) {
    TERN_CHECK_OR_RETURN(t.unk_id_ >= 0 && t.attrs_[t.unk_id_] == kAttrUnknown, Error::InvalidBundle,
                         "SentencePiece unigram tokenizer needs an unknown piece");
    t.unigram_min_score_ = FLT_MAX;
    t.unigram_max_score_ = FLT_MIN;
    for (int32_t id = 0; id < t.vocab_size_; ++id) {
      if (t.attrs_[id] == kAttrNormal || t.attrs_[id] == kAttrUserDefined) {
        t.unigram_longest_piece_ = std::max(t.unigram_longest_piece_, static_cast<uint32_t>(t.piece(id).size));
      }
      if (t.attrs_[id] != kAttrNormal) continue;
      t.unigram_min_score_ = std::min(t.unigram_min_score_, t.scores_[id]);
      t.unigram_max_score_ = std::max(t.unigram_max_score_, t.scores_[id]);
    }
  }

  // (left, right) -> rank and merged piece.
  if (layout.merge_capacity > 0) {
    TERN_ASSIGN_OR_RETURN(MergeEntry * merges,
                          arena.allocate_array<MergeEntry>(layout.merge_capacity, ArenaPurpose::Tokenizer, 64));
    for (uint32_t i = 0; i < layout.merge_capacity; ++i) merges[i] = {-1, -1, 0, -1};
    t.merge_table_ = merges;
    t.merge_table_mask_ = layout.merge_capacity - 1;
    const auto* m = fb->merges();
    const uint32_t count = m ? m->size() / 2 : 0;
    char joined[2 * kMaxPieceBytes];
    for (uint32_t rank = 0; rank < count; ++rank) {
      const uint32_t l = m->Get(2 * rank), r = m->Get(2 * rank + 1);
      TERN_CHECK_OR_RETURN(l < layout.vocab && r < layout.vocab, Error::InvalidBundle, "merge %u names id out of range", rank);
      const PieceView a = t.piece(static_cast<int32_t>(l)), b = t.piece(static_cast<int32_t>(r));
      TERN_CHECK_OR_RETURN(a.size + b.size <= sizeof joined, Error::InvalidBundle, "merge %u is too long", rank);
      std::memcpy(joined, a.data, a.size);
      std::memcpy(joined + a.size, b.data, b.size);
      const int32_t merged = t.find_piece(joined, a.size + b.size);
      TERN_CHECK_OR_RETURN(merged >= 0, Error::InvalidBundle, "merge %u makes a piece not in the vocabulary", rank);
      uint32_t slot = static_cast<uint32_t>(hash_pair(l, r)) & t.merge_table_mask_;
      bool seen = false;
      while (merges[slot].left >= 0) {
        if (merges[slot].left == static_cast<int32_t>(l) && merges[slot].right == static_cast<int32_t>(r)) {
          seen = true;  // a repeated merge keeps its first (best) rank
          break;
        }
        slot = (slot + 1) & t.merge_table_mask_;
      }
      if (!seen) merges[slot] = {static_cast<int32_t>(l), static_cast<int32_t>(r), rank, merged};
    }
  }

  // Specials, longest first so "<|eot_id|>" wins over any shorter prefix.
  if (layout.specials > 0) {
    TERN_ASSIGN_OR_RETURN(Special * specials, arena.allocate_array<Special>(layout.specials, ArenaPurpose::Tokenizer, 64));
    uint32_t n = 0;
    for (int32_t id = 0; id < t.vocab_size_; ++id) {
      const uint8_t a = t.attrs_[id];
      const PieceView p = t.piece(id);
      if ((a != kAttrControl && a != kAttrUserDefined) || p.size == 0) continue;
      specials[n++] = {id, t.piece_offsets_[id], static_cast<uint32_t>(p.size), a == kAttrUserDefined};
      if (a == kAttrUserDefined) ++t.user_defined_count_;
      const uint8_t first = static_cast<uint8_t>(p.data[0]);
      t.special_first_byte_[first >> 3] |= static_cast<uint8_t>(1u << (first & 7));
    }
    std::sort(specials, specials + n, [](const Special& x, const Special& y) {
      return x.size != y.size ? x.size > y.size : x.id < y.id;
    });
    t.specials_ = specials;
    t.special_count_ = n;
  }

  t.spm_ranked_ = t.kind_ == TokenizerKind::SentencePieceBpe && t.merge_table_ != nullptr;
  t.nfc_ = fb->normalizer() == schema::Normalizer::Nfc;
  t.max_digits_ = fb->pretokenizer() == schema::PreTokenizer::Qwen2 ? 1 : 3;
  if (t.spm_ranked_) {
    // Merges by rank: a word boundary (a space mark after another character) can be cut
    // unless some merge joins a piece ending in that character to one starting with the
    // mark (Gemma: ">" + "▁</"). Those characters are kept; with too many, no cuts.
    const auto* m = fb->merges();
    for (uint32_t i = 0; i + 1 < m->size() && t.spm_split_words_; i += 2) {
      const PieceView a = t.piece(static_cast<int32_t>(m->Get(i))), b = t.piece(static_cast<int32_t>(m->Get(i + 1)));
      if (b.size < 3 || std::memcmp(b.data, kSpaceMark, 3) != 0 || a.size == 0) continue;
      if (a.size >= 3 && std::memcmp(a.data + a.size - 3, kSpaceMark, 3) == 0) continue;
      size_t start = a.size - 1;
      while (start > 0 && (static_cast<uint8_t>(a.data[start]) & 0xC0) == 0x80) --start;
      const uint32_t cp = unicode::decode_utf8(reinterpret_cast<const uint8_t*>(a.data + start), a.size - start).cp;
      bool known = false;
      for (uint32_t k = 0; k < t.glue_count_; ++k) known |= t.glue_[k] == cp;
      if (known) continue;
      if (t.glue_count_ == kMaxGlue) {
        t.spm_split_words_ = false;
      } else {
        t.glue_[t.glue_count_++] = cp;
      }
    }
  } else if (t.is_sentencepiece()) {
    // Words can be encoded separately unless some piece glues a character to a
    // following space mark ("a▁"); then a merge (or a unigram piece) could cross the word
    // boundary.
    for (int32_t id = 0; id < t.vocab_size_ && t.spm_split_words_; ++id) {
      const uint8_t a = t.attrs_[id];
      if (a != kAttrNormal && a != kAttrUserDefined && a != kAttrUnused) continue;
      const PieceView p = t.piece(id);
      const uint8_t* s = reinterpret_cast<const uint8_t*>(p.data);
      bool prev_is_mark = true;
      for (size_t i = 0; i < p.size;) {
        const bool mark = i + 3 <= p.size && std::memcmp(s + i, kSpaceMark, 3) == 0;
        if (mark && !prev_is_mark) {
          t.spm_split_words_ = false;
          break;
        }
        prev_is_mark = mark;
        i += mark ? 3 : 1;
        while (!mark && i < p.size && (s[i] & 0xC0) == 0x80) ++i;
      }
    }
  }

  TERN_ASSIGN_OR_RETURN(t.scratch_, arena.allocate_array<uint8_t>(layout.scratch_bytes, ArenaPurpose::Tokenizer, 64));
  t.scratch_bytes_ = layout.scratch_bytes;
  return t;
}

PieceView Tokenizer::piece(int32_t id) const {
  if (id < 0 || id >= vocab_size_) return {};
  const uint32_t begin = piece_offsets_[id], end = piece_offsets_[id + 1];
  return {reinterpret_cast<const char*>(piece_bytes_ + begin), end - begin};
}

bool Tokenizer::is_control(int32_t id) const { return id >= 0 && id < vocab_size_ && attrs_[id] == kAttrControl; }

int32_t Tokenizer::find_piece(const char* bytes, size_t size) const {
  if (piece_table_ == nullptr) return -1;
  const uint8_t* b = reinterpret_cast<const uint8_t*>(bytes);
  return find_piece_hashed(b, size, hash_bytes(b, size));
}

int32_t Tokenizer::find_piece_hashed(const uint8_t* bytes, size_t size, uint64_t hash) const {
  uint32_t slot = static_cast<uint32_t>(hash) & piece_table_mask_;
  for (;;) {
    const int32_t id = piece_table_[slot];
    if (id < 0) return -1;
    const PieceView p = piece(id);
    if (p.size == size && std::memcmp(p.data, bytes, size) == 0) return id;
    slot = (slot + 1) & piece_table_mask_;
  }
}

int32_t Tokenizer::lookup_merge(int32_t left, int32_t right, uint32_t* rank) const {
  uint32_t slot = static_cast<uint32_t>(hash_pair(static_cast<uint32_t>(left), static_cast<uint32_t>(right))) & merge_table_mask_;
  for (;;) {
    const MergeEntry& e = merge_table_[slot];
    if (e.left < 0) return -1;
    if (e.left == left && e.right == right) {
      *rank = e.rank;
      return e.merged;
    }
    slot = (slot + 1) & merge_table_mask_;
  }
}

const Tokenizer::Special* Tokenizer::match_special(const uint8_t* s, size_t len, bool user_defined_only) const {
  const uint8_t b = s[0];
  if (!(special_first_byte_[b >> 3] & (1u << (b & 7)))) return nullptr;
  for (uint32_t k = 0; k < special_count_; ++k) {  // longest first
    const Special& sp = specials_[k];
    if (user_defined_only && !sp.always) continue;
    if (sp.size <= len && std::memcmp(piece_bytes_ + sp.offset, s, sp.size) == 0) return &sp;
  }
  return nullptr;
}

size_t Tokenizer::encode_scratch_bytes(size_t text_len) const {
  // A run never exceeds the text after replacements (x3) plus the dummy-prefix mark.
  const size_t runs = Scratch::required(3 * text_len + 3);
  if (!nfc_) return runs;
  // NFC: the normalized text stays at the tail; its working memory overlaps the runs'.
  return std::max(runs, unicode::nfc_work_bytes(text_len)) + align_up(unicode::nfc_output_bytes(text_len), 16) + 32;
}

namespace {

inline void emit(int32_t id, int32_t* out, size_t capacity, size_t* count) {
  if (*count < capacity) out[*count] = id;
  ++*count;
}

// The LLaMA-3 pre-tokenizer, one match at a time:
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Alternatives are tried in order at `pos`, as a backtracking regex engine does. Qwen2's
// pattern has \p{N} where LLaMA-3's has \p{N}{1,3}: max_digits 1.
class Llama3Splitter {
 public:
  Llama3Splitter(const uint8_t* s, size_t len, uint32_t max_digits = 3) : s_(s), len_(len), max_digits_(max_digits) {}

  size_t next(size_t pos) const {
    const unicode::Decoded c = at(pos);
    const uint8_t cls = unicode::classify(c.cp);
    const size_t after = pos + c.length;
    // 1. contractions, case-insensitive.
    if (c.cp == '\'' && after < len_) {
      const unicode::Decoded c1 = at(after);
      const size_t after1 = after + c1.length;
      if (is_ascii_ci(c1.cp, 's') || c1.cp == 0x17F /* long s folds to s */ || is_ascii_ci(c1.cp, 't') ||
          is_ascii_ci(c1.cp, 'm') || is_ascii_ci(c1.cp, 'd')) {
        return after1;
      }
      if (after1 < len_) {
        const uint32_t c2 = at(after1).cp;
        if ((is_ascii_ci(c1.cp, 'r') && is_ascii_ci(c2, 'e')) || (is_ascii_ci(c1.cp, 'v') && is_ascii_ci(c2, 'e')) ||
            (is_ascii_ci(c1.cp, 'l') && is_ascii_ci(c2, 'l'))) {
          return after1 + 1;
        }
      }
    }
    // 2. [^\r\n\p{L}\p{N}]?\p{L}+
    if (cls & unicode::kLetter) return skip_class(after, unicode::kLetter);
    if (c.cp != '\r' && c.cp != '\n' && !(cls & unicode::kNumber) && after < len_ &&
        (unicode::classify(at(after).cp) & unicode::kLetter)) {
      return skip_class(after, unicode::kLetter);
    }
    // 3. \p{N}{1,3}
    if (cls & unicode::kNumber) {
      size_t end = after;
      for (uint32_t i = 1; i < max_digits_ && end < len_; ++i) {
        const unicode::Decoded d = at(end);
        if (!(unicode::classify(d.cp) & unicode::kNumber)) break;
        end += d.length;
      }
      return end;
    }
    // 4. ` ?[^\s\p{L}\p{N}]+[\r\n]*`
    {
      size_t start = c.cp == ' ' ? after : pos;
      if (start < len_ && !(unicode::classify(at(start).cp) & (unicode::kWhitespace | unicode::kLetter | unicode::kNumber))) {
        size_t end = start;
        while (end < len_) {
          const unicode::Decoded d = at(end);
          if (unicode::classify(d.cp) & (unicode::kWhitespace | unicode::kLetter | unicode::kNumber)) break;
          end += d.length;
        }
        while (end < len_ && (s_[end] == '\r' || s_[end] == '\n')) ++end;
        return end;
      }
    }
    if (cls & unicode::kWhitespace) {
      // The whitespace run [pos, end), its last \r or \n, and where its last character starts.
      size_t end = pos, last_newline = SIZE_MAX, last_start = pos;
      while (end < len_) {
        const unicode::Decoded d = at(end);
        if (!(unicode::classify(d.cp) & unicode::kWhitespace)) break;
        if (d.cp == '\r' || d.cp == '\n') last_newline = end;
        last_start = end;
        end += d.length;
      }
      // 5. \s*[\r\n]+ : backtracks to the last newline of the run.
      if (last_newline != SIZE_MAX) return last_newline + 1;
      // 6. \s+(?!\S) : the whole run at the end of text, else all but its last character.
      if (end == len_) return end;
      if (last_start > pos) return last_start;
      // 7. \s+
      return end;
    }
    return after;  // unreachable: every character matches one of the alternatives
  }

 private:
  unicode::Decoded at(size_t pos) const { return unicode::decode_utf8(s_ + pos, len_ - pos); }
  size_t skip_class(size_t pos, uint8_t cls) const {
    while (pos < len_) {
      const unicode::Decoded d = at(pos);
      if (!(unicode::classify(d.cp) & cls)) break;
      pos += d.length;
    }
    return pos;
  }

  const uint8_t* s_;
  size_t len_;
  uint32_t max_digits_;
};

}  // namespace

size_t llama3_pretoken_end(const uint8_t* text, size_t len, size_t pos, uint32_t max_digits) {
  return Llama3Splitter(text, len, max_digits).next(pos);
}

Result<size_t> Tokenizer::encode(const char* text, size_t len, bool add_bos, bool parse_special, int32_t* out,
                                 size_t capacity, size_t* needed, void* scratch_memory, size_t scratch_bytes) {
  TERN_CHECK_OR_RETURN(piece_table_ != nullptr, Error::InvalidState, "tokenizer is not initialised");
  TERN_CHECK_OR_RETURN(text != nullptr || len == 0, Error::InvalidArgument, "text is null");
  TERN_CHECK_OR_RETURN(out != nullptr || capacity == 0, Error::InvalidArgument, "output is null");
  Scratch scratch(scratch_memory ? static_cast<uint8_t*>(scratch_memory) : scratch_,
                  scratch_memory ? scratch_bytes : scratch_bytes_);
  size_t count = 0;
  if (add_bos && bos_id_ >= 0) emit(bos_id_, out, capacity, &count);
  const uint8_t* s = reinterpret_cast<const uint8_t*>(text);
  size_t fragment_start = 0;
  if (special_count_ > 0) {
    // SentencePiece matches user-defined pieces inside its normalizer instead (they
    // interact with the dummy prefix and whitespace handling).
    const bool user_defined_here = kind_ == TokenizerKind::ByteLevelBpe;
    for (size_t i = 0; i < len;) {
      const Special* match = nullptr;
      if (parse_special || (user_defined_here && user_defined_count_ > 0)) {
        match = match_special(s + i, len - i, false);
        if (match != nullptr && match->always && !user_defined_here) match = nullptr;
        if (match != nullptr && !match->always && !parse_special) match = nullptr;
      }
      if (match == nullptr) {
        ++i;
        continue;
      }
      if (i > fragment_start) {
        TERN_RETURN_IF_ERROR(encode_fragment(s + fragment_start, i - fragment_start, fragment_start == 0, scratch, out,
                                             capacity, &count));
      }
      emit(match->id, out, capacity, &count);
      i += match->size;
      fragment_start = i;
    }
  }
  if (len > fragment_start) {
    TERN_RETURN_IF_ERROR(encode_fragment(s + fragment_start, len - fragment_start, fragment_start == 0, scratch, out,
                                         capacity, &count));
  }
  if (needed != nullptr) *needed = count;
  TERN_CHECK_OR_RETURN(count <= capacity, Error::OutOfRange, "text needs %zu token ids, output holds %zu", count, capacity);
  return count;
}

Error Tokenizer::encode_fragment(const uint8_t* text, size_t len, bool first_fragment, Scratch& scratch, int32_t* out,
                                 size_t capacity, size_t* count) const {
  if (kind_ == TokenizerKind::ByteLevelBpe) return encode_bpe_fragment(text, len, scratch, out, capacity, count);
  return encode_spm_fragment(text, len, first_fragment, scratch, out, capacity, count);
}

Error Tokenizer::encode_bpe_fragment(const uint8_t* text, size_t len, Scratch& scratch, int32_t* out, size_t capacity,
                                     size_t* count) const {
  if (nfc_ && !unicode::nfc_quick_check(text, len)) {
    // Normalized into the scratch's tail (kept while the fragment is encoded), with the
    // decomposition's working memory where the runs go afterwards.
    uint8_t* normalized = scratch.take_tail(unicode::nfc_output_bytes(len));
    TERN_CHECK_OR_RETURN(normalized != nullptr && scratch.bytes() >= unicode::nfc_work_bytes(len), Error::BudgetTooSmall,
                         "NFC of a %zu-byte text needs %zu bytes of tokenizer scratch, have less", len,
                         encode_scratch_bytes(len));
    len = unicode::nfc(text, len, reinterpret_cast<uint32_t*>(scratch.run_buffer()), normalized);
    text = normalized;
  }
  Llama3Splitter splitter(text, len, max_digits_);
  const bool split = fb_->pretokenizer() == schema::PreTokenizer::Llama3 || fb_->pretokenizer() == schema::PreTokenizer::Qwen2;
  for (size_t pos = 0; pos < len;) {
    const size_t end = split ? splitter.next(pos) : len;
    // Copy the pre-token with invalid bytes replaced by U+FFFD.
    size_t run = 0;
    for (size_t i = pos; i < end;) {
      const unicode::Decoded d = unicode::decode_utf8(text + i, end - i);
      run += d.valid ? d.length : 3;
      i += d.length;
    }
    TERN_CHECK_OR_RETURN(scratch.fits(run), Error::BudgetTooSmall,
                         "a %zu-byte pre-token needs %zu bytes of tokenizer scratch, have less", run,
                         Scratch::required(run));
    uint8_t* buf = scratch.run_buffer();
    size_t n = 0;
    for (size_t i = pos; i < end;) i += append_char_or_replacement(text + i, end - i, buf, &n);
    TERN_RETURN_IF_ERROR(bpe_run(buf, n, scratch, out, capacity, count));
    pos = end;
  }
  return Error::Ok;
}

Error Tokenizer::bpe_run(const uint8_t* run, size_t n, Scratch& scratch, int32_t* out, size_t capacity,
                         size_t* count) const {
  if (n == 0) return Error::Ok;
  if (n == 1) {
    emit(byte_ids_[run[0]], out, capacity, count);
    return Error::Ok;
  }
  if (ignore_merges_) {
    const int32_t whole = find_piece(reinterpret_cast<const char*>(run), n);
    if (whole >= 0) {
      emit(whole, out, capacity, count);
      return Error::Ok;
    }
  }
  BpeSymbol* sym = scratch.symbols<BpeSymbol>(n);
  for (size_t i = 0; i < n; ++i) {
    sym[i] = {static_cast<int32_t>(i) - 1, i + 1 < n ? static_cast<int32_t>(i + 1) : -1, byte_ids_[run[i]]};
  }
  merge_by_rank(sym, n, scratch.queue(n),
                [this](int32_t a, int32_t b, uint32_t* rank) { return lookup_merge(a, b, rank); });
  for (int32_t i = 0; i >= 0; i = sym[i].next) emit(sym[i].id, out, capacity, count);
  return Error::Ok;
}

bool Tokenizer::is_glue(uint32_t cp) const {
  for (uint32_t k = 0; k < glue_count_; ++k) {
    if (glue_[k] == cp) return true;
  }
  return false;
}

Error Tokenizer::spm_ranked_word(const uint8_t* word, size_t n, Scratch& scratch, int32_t* out, size_t capacity,
                                 size_t* count) const {
  if (n == 0) return Error::Ok;
  // One symbol per character in the vocabulary, else one per byte (<0xXX>) or <unk>.
  BpeSymbol* sym = scratch.symbols<BpeSymbol>(n);
  int32_t symbols = 0;
  auto add = [&](int32_t id) {
    sym[symbols] = {symbols - 1, -1, id};
    if (symbols > 0) sym[symbols - 1].next = symbols;
    ++symbols;
  };
  for (size_t i = 0; i < n;) {
    const uint32_t len = std::max<uint32_t>(1, std::min<uint32_t>(unicode::sequence_length(word[i]), static_cast<uint32_t>(n - i)));
    const int32_t id = find_piece(reinterpret_cast<const char*>(word + i), len);
    if (id >= 0 && attrs_[id] != kAttrControl && attrs_[id] != kAttrUnknown) {
      add(id);
    } else if (byte_fallback_) {
      for (uint32_t k = 0; k < len; ++k) add(byte_ids_[word[i + k]]);
    } else {
      add(unk_id_);
    }
    i += len;
  }
  merge_by_rank(sym, static_cast<size_t>(symbols), scratch.queue(n),
                [this](int32_t a, int32_t b, uint32_t* rank) { return lookup_merge(a, b, rank); });
  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    const bool unknown = sym[i].id == unk_id_;
    if (!(unknown && scratch.prev_unknown)) emit(sym[i].id, out, capacity, count);  // fuse runs of <unk>
    scratch.prev_unknown = unknown;
  }
  return Error::Ok;
}

Error Tokenizer::encode_spm_fragment(const uint8_t* text, size_t len, bool first_fragment, Scratch& scratch,
                                     int32_t* out, size_t capacity, size_t* count) const {
  // Normalization as SentencePiece's identity normalizer: optional removal of extra
  // spaces, the dummy-prefix mark, ' ' -> U+2581, invalid bytes -> U+FFFD. The
  // normalized text is cut into words before each space mark that follows another
  // character, and each word goes through BPE on its own (see spm_split_words_).
  size_t pos = 0;
  if (remove_extra_whitespaces_) {
    // Leading spaces go; so does the trailing run of spaces and U+2581 (SentencePiece
    // strips it from the normalized text, where the two look the same).
    while (pos < len && text[pos] == ' ') ++pos;
    for (;;) {
      if (len > pos && text[len - 1] == ' ') {
        --len;
      } else if (len >= pos + 3 && std::memcmp(text + len - 3, kSpaceMark, 3) == 0) {
        len -= 3;
      } else {
        break;
      }
    }
    if (pos == len) return Error::Ok;
  }
  scratch.prev_unknown = false;
  scratch.unigram_score = 0;
  bool dummy = first_fragment && add_dummy_prefix_;
  // Two passes per word: measure, then fill the buffer.
  while (pos < len || dummy) {
    size_t word_end = pos, word_bytes = dummy ? 3 : 0;
    bool prev_mark = dummy;
    uint32_t prev_cp = 0;
    bool started = dummy;
    for (size_t i = pos; i < len;) {
      // BPE: user-defined pieces are frozen symbols: no merge crosses them, so the word ends
      // before one, and one at the start of a word is emitted as is. (Unigram scores them
      // in its lattice, as libsentencepiece does.)
      const Special* user = user_defined_count_ > 0 && kind_ == TokenizerKind::SentencePieceBpe
                                 ? match_special(text + i, len - i, true)
                                 : nullptr;
      if (user != nullptr) {
        if (word_bytes > 0) break;
        emit(user->id, out, capacity, count);
        scratch.prev_unknown = false;
        i += user->size;
        pos = word_end = i;
        continue;
      }
      if (text[i] == ' ') {
        size_t j = i + 1;
        if (remove_extra_whitespaces_) {
          while (j < len && text[j] == ' ') ++j;
          if (j == len) {  // trailing spaces vanish
            i = j;
            word_end = j;
            break;
          }
        }
        if (started && !prev_mark && spm_split_words_ && !(glue_count_ > 0 && is_glue(prev_cp))) break;
        word_bytes += 3;
        prev_mark = true;
        started = true;
        i = j;
        word_end = i;
        continue;
      }
      const unicode::Decoded d = unicode::decode_utf8(text + i, len - i);
      word_bytes += d.valid ? d.length : 3;
      prev_mark = d.valid && d.length == 3 && std::memcmp(text + i, kSpaceMark, 3) == 0;
      prev_cp = d.cp;
      started = true;
      i += d.length;
      word_end = i;
    }
    if (word_bytes == 0) break;
    TERN_CHECK_OR_RETURN(scratch.fits(word_bytes), Error::BudgetTooSmall,
                         "a %zu-byte word needs %zu bytes of tokenizer scratch, have less", word_bytes,
                         Scratch::required(word_bytes));
    uint8_t* buf = scratch.run_buffer();
    size_t n = 0;
    if (dummy) {
      std::memcpy(buf, kSpaceMark, 3);
      n = 3;
      dummy = false;
    }
    for (size_t i = pos; i < word_end;) {
      if (text[i] == ' ') {
        size_t j = i + 1;
        if (remove_extra_whitespaces_) {
          while (j < len && text[j] == ' ') ++j;
          if (j == len) {
            i = j;
            continue;
          }
        }
        std::memcpy(buf + n, kSpaceMark, 3);
        n += 3;
        i = j;
        continue;
      }
      i += append_char_or_replacement(text + i, len - i, buf, &n);
    }
    if (kind_ == TokenizerKind::SentencePieceUnigram) {
      TERN_RETURN_IF_ERROR(unigram_word(buf, n, scratch, out, capacity, count));
    } else if (spm_ranked_) {
      TERN_RETURN_IF_ERROR(spm_ranked_word(buf, n, scratch, out, capacity, count));
    } else {
      TERN_RETURN_IF_ERROR(spm_word(buf, n, scratch, out, capacity, count));
    }
    pos = word_end;
  }
  return Error::Ok;
}

Error Tokenizer::spm_word(const uint8_t* word, size_t n, Scratch& scratch, int32_t* out, size_t capacity,
                          size_t* count) const {
  if (n == 0) return Error::Ok;
  SpmSymbol* sym = scratch.symbols<SpmSymbol>(n);
  PairQueue queue{scratch.queue(n), 0, 3 * n};
  size_t symbols = 0;
  for (size_t i = 0; i < n;) {
    const uint32_t len = std::max<uint32_t>(1, std::min<uint32_t>(unicode::sequence_length(word[i]), static_cast<uint32_t>(n - i)));
    sym[symbols] = {static_cast<int32_t>(symbols) - 1, -1, static_cast<uint32_t>(i), len};
    if (symbols > 0) sym[symbols - 1].next = static_cast<int32_t>(symbols);
    ++symbols;
    i += len;
  }
  auto try_pair = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t size = sym[l].size + sym[r].size;
    const int32_t id = find_piece(reinterpret_cast<const char*>(word + sym[l].start), size);
    if (id < 0) return;
    const uint8_t a = attrs_[id];
    if (a != kAttrNormal && a != kAttrUserDefined && a != kAttrUnused) return;
    queue.push({scores_[id], static_cast<uint32_t>(l), static_cast<uint32_t>(r), static_cast<int32_t>(size)});
  };
  for (size_t i = 0; i + 1 < symbols; ++i) try_pair(static_cast<int32_t>(i), static_cast<int32_t>(i + 1));
  while (queue.size > 0) {
    const QueuedPair p = queue.pop();
    SpmSymbol& l = sym[p.left];
    SpmSymbol& r = sym[p.right];
    if (l.size == 0 || r.size == 0 || l.size + r.size != static_cast<uint32_t>(p.aux)) continue;
    l.size += r.size;
    r.size = 0;
    l.next = r.next;
    if (l.next >= 0) sym[l.next].prev = static_cast<int32_t>(p.left);
    try_pair(l.prev, static_cast<int32_t>(p.left));
    try_pair(static_cast<int32_t>(p.left), l.next);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    const uint8_t* s = word + sym[i].start;
    emit_spm_piece(find_piece(reinterpret_cast<const char*>(s), sym[i].size), s, sym[i].size, scratch, out, capacity,
                   count);
  }
  return Error::Ok;
}

void Tokenizer::emit_spm_piece(int32_t id, const uint8_t* s, uint32_t size, Scratch& scratch, int32_t* out,
                               size_t capacity, size_t* count) const {
  if (id >= 0 && attrs_[id] != kAttrUnknown) {
    emit(id, out, capacity, count);
    scratch.prev_unknown = false;
  } else if (byte_fallback_) {
    for (uint32_t k = 0; k < size; ++k) emit(byte_ids_[s[k]], out, capacity, count);
    scratch.prev_unknown = false;
  } else {
    if (!scratch.prev_unknown) emit(unk_id_, out, capacity, count);  // a run of unknowns is one <unk>
    scratch.prev_unknown = true;
  }
}

// libsentencepiece's optimized unigram Viterbi (unigram_model.cc, EncodeOptimized), one
// word at a time: for each character start in order, every normal or user-defined piece
// beginning there offers a path to its end, kept when strictly better (so of equal scores
// the earliest start wins); a start no one-character piece covers offers <unk> for that
// character. The score types follow libsentencepiece's (double candidates stored as float)
// so that near-ties round the same way.
Error Tokenizer::unigram_word(const uint8_t* word, size_t n, Scratch& scratch, int32_t* out, size_t capacity,
                              size_t* count) const {
  if (n == 0) return Error::Ok;
  UnigramNode* node = scratch.symbols<UnigramNode>(n);
  for (size_t i = 0; i <= n; ++i) node[i] = {0.0f, -1, -1, -1};
  node[0].score = scratch.unigram_score;
  const float unknown_score = unigram_min_score_ - kUnigramUnknownPenalty;
  for (size_t start = 0; start < n;) {
    const float score_here = node[start].score;
    const size_t char_len = std::max<size_t>(1, std::min<size_t>(unicode::sequence_length(word[start]), n - start));
    bool has_single_char_piece = false;
    const size_t longest = std::min<size_t>(n - start, unigram_longest_piece_);
    uint64_t prefix_hash = kFnv1aBasis;
    for (size_t len = 1; len <= longest; ++len) {
      prefix_hash = fnv1a_step(prefix_hash, word[start + len - 1]);
      const int32_t id = find_piece_hashed(word + start, len, fnv_finish(prefix_hash));
      if (id < 0) continue;
      const uint8_t a = attrs_[id];
      if (a != kAttrNormal && a != kAttrUserDefined) continue;  // unused, control, byte, unknown pieces never match
      const double piece_score = a == kAttrUserDefined
                                     ? static_cast<double>(static_cast<float>(len) * unigram_max_score_) - 0.1
                                     : static_cast<double>(scores_[id]);
      const double candidate = piece_score + static_cast<double>(score_here);
      UnigramNode& target = node[start + len];
      if (target.start < 0 || candidate > static_cast<double>(target.score)) {
        target = {static_cast<float>(candidate), static_cast<int32_t>(start), id, -1};
      }
      if (len == char_len) has_single_char_piece = true;
    }
    if (!has_single_char_piece) {
      const float candidate = unknown_score + score_here;
      UnigramNode& target = node[start + char_len];
      if (target.start < 0 || candidate > target.score) {
        target = {candidate, static_cast<int32_t>(start), unk_id_, -1};
      }
    }
    start += char_len;
  }
  scratch.unigram_score = node[n].score;
  for (size_t end = n; end > 0;) {  // the way back, linking each piece to the next
    const size_t start = static_cast<size_t>(node[end].start);
    node[start].link = static_cast<int32_t>(end);
    end = start;
  }
  for (size_t start = 0; start < n;) {
    const size_t end = static_cast<size_t>(node[start].link);
    emit_spm_piece(node[end].id, word + start, static_cast<uint32_t>(end - start), scratch, out, capacity, count);
    start = end;
  }
  return Error::Ok;
}

size_t Tokenizer::token_text(int32_t id, bool first, uint8_t* buf, size_t capacity) const {
  const uint8_t a = attrs_[id];
  if (a == kAttrControl) return 0;
  const PieceView p = piece(id);
  const uint8_t* s = reinterpret_cast<const uint8_t*>(p.data);
  if (kind_ == TokenizerKind::ByteLevelBpe) {
    const size_t n = std::min(p.size, capacity);
    std::memcpy(buf, s, n);
    return n;
  }
  if (a == kAttrByte) {
    // "<0xXX>"
    auto hex = [](uint8_t c) -> int { return c >= 'a' ? c - 'a' + 10 : c >= 'A' ? c - 'A' + 10 : c - '0'; };
    if (p.size != 6 || capacity < 1) return 0;
    buf[0] = static_cast<uint8_t>(hex(s[3]) * 16 + hex(s[4]));
    return 1;
  }
  if (a == kAttrUnknown) {
    const size_t n = std::min(unk_surface_size_, capacity);
    std::memcpy(buf, unk_surface_, n);
    return n;
  }
  size_t i = 0, n = 0;
  if (first && add_dummy_prefix_) {
    // SentencePiece drops the dummy-prefix space; with remove_extra_whitespaces it drops
    // every leading space (the decoder keeps `first` until something else comes out).
    do {
      if (p.size < i + 3 || std::memcmp(s + i, kSpaceMark, 3) != 0) break;
      i += 3;
    } while (remove_extra_whitespaces_);
  }
  while (i < p.size && n < capacity) {
    if (i + 3 <= p.size && std::memcmp(s + i, kSpaceMark, 3) == 0) {
      buf[n++] = ' ';
      i += 3;
    } else {
      buf[n++] = s[i++];
    }
  }
  return n;
}

size_t Tokenizer::token_bytes(int32_t id, uint8_t* buf, size_t capacity) const {
  if (id < 0 || id >= vocab_size_) return 0;
  return token_text(id, false, buf, capacity);
}

size_t Tokenizer::max_token_bytes() { return kMaxPieceBytes + kMaxUnknownSurface; }

void TokenDecoder::reset() {
  first_ = true;
  pending_size_ = 0;
}

// Moves complete characters from pending + bytes to out; keeps an incomplete tail
// unless `final`. Returns the bytes written. With out == nullptr, only counts them and
// leaves the decoder as it was.
size_t TokenDecoder::drain(const uint8_t* bytes, size_t size, bool final, uint8_t* out) {
  if (out == nullptr) {
    TokenDecoder probe = *this;
    uint8_t sink[4 * (kMaxPieceBytes + kMaxUnknownSurface + 4)];
    return probe.drain(bytes, size, final, sink);
  }
  size_t written = 0;
  size_t i = 0;
  // Feed bytes one at a time through the 4-byte pending buffer.
  for (;;) {
    while (pending_size_ < 4 && i < size) pending_[pending_size_++] = bytes[i++];
    if (pending_size_ == 0) break;
    const uint32_t want = unicode::sequence_length(pending_[0]);
    if (want != 0 && pending_size_ < want && i == size && !final) {
      // Incomplete so far: valid prefix? Then wait for more bytes.
      bool prefix_ok = true;
      for (uint32_t k = 1; k < pending_size_; ++k) prefix_ok &= (pending_[k] & 0xC0) == 0x80;
      if (prefix_ok) break;
    }
    const size_t taken = append_char_or_replacement(pending_, pending_size_, out, &written);
    std::memmove(pending_, pending_ + taken, pending_size_ - taken);
    pending_size_ -= taken;
  }
  return written;
}

Result<size_t> TokenDecoder::push(int32_t id, char* out, size_t capacity) {
  const Tokenizer& t = *tokenizer_;
  TERN_CHECK_OR_RETURN(id >= 0 && id < t.vocab_size_, Error::InvalidToken, "token id %d outside vocabulary of %d", id,
                       t.vocab_size_);
  if (t.attrs_[id] == kAttrControl) return size_t{0};
  uint8_t raw[kMaxPieceBytes + kMaxUnknownSurface];
  const size_t raw_size = t.token_text(id, first_, raw, sizeof raw);
  const size_t need = drain(raw, raw_size, false, nullptr);
  TERN_CHECK_OR_RETURN(capacity >= need, Error::OutOfRange, "decoder output of %zu bytes is too small (need %zu)",
                       capacity, need);
  if (raw_size > 0 || !t.remove_extra_whitespaces_) first_ = false;
  return drain(raw, raw_size, false, reinterpret_cast<uint8_t*>(out));
}

Result<size_t> TokenDecoder::flush(char* out, size_t capacity) {
  const size_t need = drain(nullptr, 0, true, nullptr);
  TERN_CHECK_OR_RETURN(capacity >= need, Error::OutOfRange, "decoder flush needs %zu bytes of output", need);
  const size_t written = drain(nullptr, 0, true, reinterpret_cast<uint8_t*>(out));
  reset();
  return written;
}

}  // namespace tern
