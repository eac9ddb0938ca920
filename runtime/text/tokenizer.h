// The device tokenizer: encodes text to token ids and decodes ids back to text for the
// two families Tern supports, read from the bundle's `schema::Tokenizer` table:
//  - byte-level BPE with the LLaMA-3 pre-tokenizer (bitnet-b1.58-2B-4T, tiny-austen),
//    matching Hugging Face tokenizers;
//  - SentencePiece BPE (LLaMA-2, bitllama2c) and SentencePiece unigram (Viterbi over the
//    pieces' scores; T5-style models, spm_train's default), matching libsentencepiece.
//
// Memory: every lookup table is built once in create() inside the caller's arena
// (required_arena_bytes() says how much). encode() never touches the heap: it works in a
// scratch buffer, either the one reserved in the arena at create() or one the caller
// passes. Scratch grows with the longest run of text BPE must see at once (a
// pre-token for byte-level BPE, a space-delimited word for SentencePiece), see
// encode_scratch_bytes().
//
// Defined behaviour for awkward input:
//  - Invalid UTF-8: each byte that does not start a valid sequence is replaced by U+FFFD
//    (one replacement per byte, as SentencePiece's normalizer does), for both families;
//    encoding never fails on it. Decoding such ids gives back the U+FFFD characters.
//    (Hugging Face tokenizers only accept valid strings; a caller that decodes bytes
//    with "replace" may get one U+FFFD for a whole truncated sequence instead.)
//  - Empty input: zero ids (plus BOS when asked).
//  - Embedded NUL: an ordinary character (length-delimited input, never NUL-terminated).
//  - Output too small: fails with OutOfRange after counting; *needed (when given) and
//    the message hold the id count the text needs.
//  - A run longer than the scratch allows (e.g. 1 MB of letters without a space): fails
//    with BudgetTooSmall, naming the scratch bytes needed; pass a larger scratch
//    (encode_scratch_bytes(len) is always enough). Runs cost ~65 scratch bytes a byte.
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/error.h"
#include "runtime/base/arena.h"

namespace tern {
namespace schema {
struct Tokenizer;
}  // namespace schema

enum class TokenizerKind : uint8_t { ByteLevelBpe = 1, SentencePieceBpe = 2, SentencePieceUnigram = 3 };

struct TokenizerOptions {
  // Scratch reserved in the arena for encode() calls without a caller buffer, sized for
  // runs (pre-tokens / words) of this many bytes.
  size_t max_run_bytes = 16 * 1024;
};

struct PieceView {
  const char* data = nullptr;
  size_t size = 0;
};

class Tokenizer {
 public:
  // Arena bytes create() will take for `tokenizer` (tables, scratch, alignment padding);
  // 0 when the table is invalid (create() then says why). With the default options:
  // LLaMA-3 10.5 MB (8 MB merge table), LLaMA-2 1.3 MB; 1.07 MB of each is scratch.
  static size_t required_arena_bytes(const schema::Tokenizer* tokenizer, const TokenizerOptions& options = {});
  // Validates the table (InvalidBundle on inconsistent data, NotSupported on an unknown
  // type) and builds the lookup tables in `arena`. `tokenizer` must outlive the result.
  static Result<Tokenizer> create(const schema::Tokenizer* tokenizer, ArenaAllocator& arena,
                                  const TokenizerOptions& options = {});

  Tokenizer() = default;

  // Encodes `len` bytes of `text` into `out`. add_bos prepends bos_id(); parse_special
  // turns the text of control tokens (e.g. "<|eot_id|>", "<s>") into their ids instead
  // of encoding the characters. User-defined pieces are always matched (as Hugging Face
  // does for added tokens and SentencePiece for user_defined_symbols). With SentencePiece
  // the dummy-prefix space goes only before text that starts the input, not after a
  // parsed control token.
  // Uses the arena scratch unless `scratch` is given: the arena scratch makes concurrent
  // calls on one Tokenizer unsafe; caller scratch buffers make them safe.
  Result<size_t> encode(const char* text, size_t len, bool add_bos, bool parse_special, int32_t* out, size_t capacity,
                        size_t* needed = nullptr, void* scratch = nullptr, size_t scratch_bytes = 0);
  // Scratch bytes that always suffice to encode `text_len` bytes.
  size_t encode_scratch_bytes(size_t text_len) const;

  TokenizerKind kind() const { return kind_; }
  int32_t vocab_size() const { return vocab_size_; }
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t eot_id() const { return eot_id_; }
  int32_t unk_id() const { return unk_id_; }
  bool add_bos_default() const { return add_bos_; }
  // The stored piece: raw bytes (byte-level BPE) or the SentencePiece piece (U+2581 for
  // spaces, "<0x0A>" for byte pieces). Empty for an out-of-range id.
  PieceView piece(int32_t id) const;
  // A control token (BOS, EOS, chat markers): decodes to nothing.
  bool is_control(int32_t id) const;
  // True for ids that end generation (EOS or end-of-turn).
  bool is_end_of_generation(int32_t id) const { return id >= 0 && (id == eos_id_ || id == eot_id_); }
  // Id of a piece given exactly as stored, or -1.
  int32_t find_piece(const char* bytes, size_t size) const;
  // The bytes generation emits for `id` after other text (SentencePiece spaces and byte
  // pieces resolved; nothing for control tokens), at most `capacity` of them; returns the
  // count. At most max_token_bytes().
  size_t token_bytes(int32_t id, uint8_t* buf, size_t capacity) const;
  static size_t max_token_bytes();

 private:
  friend class TokenDecoder;
  struct Layout;
  struct MergeEntry;
  struct Special;
  class Scratch;

  static Error plan(const schema::Tokenizer* tokenizer, const TokenizerOptions& options, Layout* layout);
  // create()'s steps, in order (tokenizer_create.cpp and the files of the parts they build).
  void read_table(const schema::Tokenizer* tokenizer, uint32_t vocab);
  Error build_piece_table(ArenaAllocator& arena, uint32_t capacity);
  Error map_bytes();
  Error prepare_unigram();
  Error build_merge_table(ArenaAllocator& arena, uint32_t capacity);
  Error build_specials(ArenaAllocator& arena, uint32_t count);
  void find_merge_glue();
  void check_word_split();
  Error encode_fragment(const uint8_t* text, size_t len, bool first_fragment, Scratch& scratch, int32_t* out,
                        size_t capacity, size_t* count) const;
  Error encode_bpe_fragment(const uint8_t* text, size_t len, Scratch& scratch, int32_t* out, size_t capacity,
                            size_t* count) const;
  Error encode_spm_fragment(const uint8_t* text, size_t len, bool first_fragment, Scratch& scratch, int32_t* out,
                            size_t capacity, size_t* count) const;
  // The measuring pass over the SentencePiece word at *pos: its normalized bytes (0: no word
  // left) and its end. User-defined pieces before it are emitted and skipped (*pos moves).
  size_t measure_spm_word(const uint8_t* text, size_t len, bool dummy, size_t* pos, size_t* word_end, Scratch& scratch,
                          int32_t* out, size_t capacity, size_t* count) const;
  // The filling pass: text[pos, word_end) normalized into buf, after the dummy-prefix mark
  // when `dummy`; returns the bytes written.
  size_t copy_spm_word(const uint8_t* text, size_t pos, size_t word_end, size_t len, bool dummy, uint8_t* buf) const;
  Error bpe_run(const uint8_t* run, size_t len, Scratch& scratch, int32_t* out, size_t capacity, size_t* count) const;
  Error spm_word(const uint8_t* word, size_t len, Scratch& scratch, int32_t* out, size_t capacity, size_t* count) const;
  Error spm_ranked_word(const uint8_t* word, size_t len, Scratch& scratch, int32_t* out, size_t capacity,
                        size_t* count) const;
  bool is_glue(uint32_t cp) const;
  Error unigram_word(const uint8_t* word, size_t len, Scratch& scratch, int32_t* out, size_t capacity,
                     size_t* count) const;
  // One SentencePiece piece of the segmentation: its id, or its bytes through byte fallback
  // or as (a run of) <unk> when `id` is -1 or the unknown piece.
  void emit_spm_piece(int32_t id, const uint8_t* bytes, uint32_t size, Scratch& scratch, int32_t* out, size_t capacity,
                      size_t* count) const;
  bool is_sentencepiece() const { return kind_ != TokenizerKind::ByteLevelBpe; }
  int32_t lookup_merge(int32_t left, int32_t right, uint32_t* rank) const;
  // find_piece with the piece table's hash of the bytes already computed.
  int32_t find_piece_hashed(const uint8_t* bytes, size_t size, uint64_t hash) const;
  // The longest control / user-defined piece at s (len > 0), or null.
  const Special* match_special(const uint8_t* s, size_t len, bool user_defined_only) const;
  // Bytes the decoder emits for `id` (before UTF-8 reassembly); `first` is true for the
  // first non-control token of the text (SentencePiece strips its dummy-prefix space).
  size_t token_text(int32_t id, bool first, uint8_t* buf, size_t capacity) const;

  const schema::Tokenizer* fb_ = nullptr;
  TokenizerKind kind_ = TokenizerKind::ByteLevelBpe;
  int32_t vocab_size_ = 0;
  int32_t bos_id_ = -1, eos_id_ = -1, eot_id_ = -1, unk_id_ = -1;
  bool add_bos_ = false;
  bool add_dummy_prefix_ = false;
  bool remove_extra_whitespaces_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  // SentencePiece words may be encoded one at a time only when no piece joins a
  // non-space character to a following U+2581 (true for the models we know).
  bool spm_split_words_ = true;
  // SentencePiece-style with merges (Gemma's tokenizer.json): merges by rank from the
  // characters (unknown ones as <0xXX> bytes), as Hugging Face BPE does. A word boundary
  // after one of glue_ is never cut (a merge crosses it).
  bool spm_ranked_ = false;
  static constexpr uint32_t kMaxGlue = 16;
  uint32_t glue_[kMaxGlue] = {};
  uint32_t glue_count_ = 0;
  bool nfc_ = false;         // NFC-normalize each fragment first (Qwen)
  uint32_t max_digits_ = 3;  // digits one pre-token takes: LLaMA-3 3, Qwen2 1
  // Unigram: the least and greatest score of a normal piece (SentencePiece's min_score_ and
  // max_score_, the latter starting from FLT_MIN as libsentencepiece's does); an unknown
  // character costs min - 10, a user-defined piece of L bytes scores L * max - 0.1.
  float unigram_min_score_ = 0;
  float unigram_max_score_ = 0;
  uint32_t unigram_longest_piece_ = 0;  // bytes of the longest normal or user-defined piece
  const uint8_t* piece_bytes_ = nullptr;
  const uint32_t* piece_offsets_ = nullptr;
  const float* scores_ = nullptr;
  const uint8_t* attrs_ = nullptr;
  // Open-addressing hash tables, capacities are powers of two.
  const int32_t* piece_table_ = nullptr;  // piece bytes -> id
  uint32_t piece_table_mask_ = 0;
  const MergeEntry* merge_table_ = nullptr;  // (left id, right id) -> rank, merged id
  uint32_t merge_table_mask_ = 0;
  const char* unk_surface_ = " \xE2\x81\x87 ";  // SentencePiece's default
  size_t unk_surface_size_ = 5;
  int32_t byte_ids_[256] = {};         // byte -> token (byte-level BPE: the byte; SentencePiece: <0xXX>)
  const Special* specials_ = nullptr;  // longest first
  uint32_t special_count_ = 0;
  uint32_t user_defined_count_ = 0;
  uint8_t special_first_byte_[32] = {};  // bitmap of the first bytes of specials
  uint8_t* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
};

// Turns ids back into text as they are generated: emits only complete UTF-8 characters
// (a character split over several byte tokens comes out once its last byte arrives),
// skips control tokens, maps SentencePiece U+2581 to spaces, "<0xXX>" to bytes, and
// strips the dummy-prefix space of the first piece like SentencePiece's decoder. Bytes
// that cannot form a valid character come out as U+FFFD, one per byte. No allocation.
class TokenDecoder {
 public:
  explicit TokenDecoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  // Appends the text completed by `id` to out; returns the bytes written. InvalidToken
  // for an id outside the vocabulary; OutOfRange when the text does not fit in
  // `capacity` (nothing is consumed then; 3 * (piece bytes + 3) always fits).
  Result<size_t> push(int32_t id, char* out, size_t capacity);
  // Emits what is left (an incomplete character becomes U+FFFD per byte, at most 9
  // bytes) and resets.
  Result<size_t> flush(char* out, size_t capacity);
  void reset();
  // Decodes as after earlier text (SentencePiece keeps the first piece's leading space).
  void continue_text() { first_ = false; }

 private:
  size_t drain(const uint8_t* bytes, size_t size, bool final, uint8_t* out);

  const Tokenizer* tokenizer_;
  bool first_ = true;
  uint8_t pending_[4] = {};
  uint32_t pending_size_ = 0;
};

}  // namespace tern
