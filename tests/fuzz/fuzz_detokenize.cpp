// Token-id sequences into detokenization (tern_detokenize, as tern-server's /detokenize and
// every generated piece use it), for a byte-level BPE vocabulary of 2,048 and LLaMA-3's of
// 128,256 (pieces up to 128 bytes). The first byte picks the bundle, the second the capacity
// of a deliberately small buffer; the rest are int32 ids, any value. Invariants: the text is
// valid UTF-8 (checked by the server's own validator, not the decoder's), a refusal names an
// id outside the vocabulary or a full buffer, and a small buffer yields a prefix of the text.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_models.h"
#include "tools/server/server_api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static tern_model* models[] = {tern::fuzz::load_model(tern::fuzz::kPlainBundle),
                                 tern::fuzz::load_model(tern::fuzz::kLlama3Bundle)};
  if (size < 2) return 0;
  tern_model* model = models[data[0] % 2];
  const size_t small_capacity = 1 + data[1] % 96;
  std::vector<int32_t> ids((size - 2) / 4);
  if (!ids.empty()) std::memcpy(ids.data(), data + 2, ids.size() * 4);
  // 3 * (piece + 3) bytes per id always fit (TokenDecoder::push); pieces are at most 128 bytes.
  std::vector<char> full(ids.size() * 3 * (128 + 3) + 16);
  size_t full_size = 0;
  const tern_status st = tern_detokenize(model, ids.data(), ids.size(), full.data(), full.size(), &full_size);
  if (st != TERN_OK && st != TERN_INVALID_TOKEN) __builtin_trap();
  if (full_size >= full.size() || full[full_size] != '\0') __builtin_trap();
  const std::string text(full.data(), full_size);
  if (!tern::server::valid_utf8(text)) __builtin_trap();
  std::vector<char> small(small_capacity);
  size_t small_size = 0;
  const tern_status sst = tern_detokenize(model, ids.data(), ids.size(), small.data(), small.size(), &small_size);
  if (sst != TERN_OK && sst != TERN_INVALID_TOKEN && sst != TERN_OUT_OF_RANGE) __builtin_trap();
  if (small_size >= small.size() || text.compare(0, small_size, small.data(), small_size) != 0) __builtin_trap();
  if (sst == TERN_OK && (st != TERN_OK || small_size != full_size)) __builtin_trap();
  return 0;
}
