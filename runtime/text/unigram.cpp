// SentencePiece unigram encoding: the Viterbi segmentation of a word over the pieces' scores.
#include <algorithm>
#include <cfloat>

#include "runtime/base/hash.h"
#include "runtime/text/piece_table.h"
#include "runtime/text/tokenizer.h"
#include "runtime/text/tokenizer_internal.h"
#include "runtime/text/unicode.h"

namespace tern {
using namespace tokenizer_detail;

namespace {

// The best segmentation of a word's first `end` bytes ends with the piece `id` starting at
// `start` (-1: not reached yet); `link` is filled on the way back (the next piece's end).
struct UnigramNode {
  float score;
  int32_t start, id, link;
};
// libsentencepiece's penalty for an unknown character, below the least-probable piece.
constexpr float kUnigramUnknownPenalty = 10.0f;

}  // namespace

Error Tokenizer::prepare_unigram() {
  TERN_CHECK_OR_RETURN(unk_id_ >= 0 && attrs_[unk_id_] == kAttrUnknown, Error::InvalidBundle,
                       "SentencePiece unigram tokenizer needs an unknown piece");
  unigram_min_score_ = FLT_MAX;
  unigram_max_score_ = FLT_MIN;
  for (int32_t id = 0; id < vocab_size_; ++id) {
    if (attrs_[id] == kAttrNormal || attrs_[id] == kAttrUserDefined) {
      unigram_longest_piece_ = std::max(unigram_longest_piece_, static_cast<uint32_t>(piece(id).size));
    }
    if (attrs_[id] != kAttrNormal) continue;
    unigram_min_score_ = std::min(unigram_min_score_, scores_[id]);
    unigram_max_score_ = std::max(unigram_max_score_, scores_[id]);
  }
  return Error::Ok;
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

}  // namespace tern
