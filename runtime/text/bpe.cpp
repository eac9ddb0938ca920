// Byte-level BPE encoding: optional NFC, the pre-tokenizer, then merges by rank over each pre-token's bytes.
#include "runtime/text/pretokenizer.h"
#include "runtime/text/symbol_merge.h"
#include "runtime/text/tokenizer.h"
#include "runtime/text/tokenizer_internal.h"
#include "runtime/text/unicode.h"

namespace tern {
using namespace tokenizer_detail;

Error Tokenizer::encode_bpe_fragment(const uint8_t* text, size_t len, Scratch& scratch, int32_t* out, size_t capacity,
                                     size_t* count) const {
  if (nfc_ && !unicode::nfc_quick_check(text, len)) {
    // Normalized into the scratch's tail (kept while the fragment is encoded), with the
    // decomposition's working memory where the runs go afterwards.
    uint8_t* normalized = scratch.take_tail(unicode::nfc_output_bytes(len));
    TERN_CHECK_OR_RETURN(
        normalized != nullptr && scratch.bytes() >= unicode::nfc_work_bytes(len), Error::BudgetTooSmall,
        "NFC of a %zu-byte text needs %zu bytes of tokenizer scratch, have less", len, encode_scratch_bytes(len));
    len = unicode::nfc(text, len, reinterpret_cast<uint32_t*>(scratch.run_buffer()), normalized);
    text = normalized;
  }
  Llama3Splitter splitter(text, len, max_digits_);
  const bool split =
      fb_->pretokenizer() == schema::PreTokenizer::Llama3 || fb_->pretokenizer() == schema::PreTokenizer::Qwen2;
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

}  // namespace tern
