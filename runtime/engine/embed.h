// Text embeddings from an embedding model (a bundle with an Embedding table): each text is
// tokenized (after the named instruction, if any), run through the forward pass with as
// many texts per batch as fit (each attends only to itself), pooled, L2-normalized,
// optionally cut to its first D dimensions and re-normalized, and written as float32,
// int8 or packed bits into the caller's buffer. Session::embed runs it without allocating.
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/error.h"
#include "runtime/model/model_config.h"

namespace tern {

// Ids appear in the C API: append only.
enum class EmbedFormat : int32_t {
  Float32 = 0,  // dims floats
  Int8 = 1,     // dims int8: round(v * 127 / max|v|); the per-text scale max|v| / 127 goes to `scales`
  Binary = 2,   // ceil(dims / 8) bytes: bit 7 - (i % 8) of byte i / 8 is v_i > 0 (numpy.packbits order)
};

struct EmbedOptions {
  uint32_t dimensions = 0;  // 0: the model's; else the first D, re-normalized (Matryoshka)
  EmbedFormat format = EmbedFormat::Float32;
  // A prompt stored in the bundle ("query", "document", ...) put in front of every text.
  // Null: the bundle's default prompt (none when it has none); "": no prompt.
  const char* prompt_name = nullptr;
  // Text to put in front instead of a stored prompt (e.g. "Instruct: ...\nQuery: "); null: none.
  const char* instruction = nullptr;
  // Texts longer than the context keep their first tokens (and the end token when the model
  // appends one); otherwise they fail with PromptTooLong.
  bool truncate = false;
};

// What Session::embed embeds: texts (sizes null: NUL-terminated), or token-id lists (the
// ids of a text as encoded without a BOS; the BOS, prompt and end token are added as for a
// text, not twice when the ids already start or end with them).
struct EmbedInputs {
  const char* const* texts = nullptr;
  const size_t* sizes = nullptr;
  const int32_t* const* tokens = nullptr;
  const size_t* token_counts = nullptr;
  size_t count = 0;
  static EmbedInputs of_texts(const char* const* texts, const size_t* sizes, size_t count) {
    return EmbedInputs{texts, sizes, nullptr, nullptr, count};
  }
  static EmbedInputs of_tokens(const int32_t* const* tokens, const size_t* counts, size_t count) {
    return EmbedInputs{nullptr, nullptr, tokens, counts, count};
  }
};

struct EmbedStats {
  uint32_t texts = 0;
  uint64_t tokens = 0;     // tokens run, prompts and end tokens included
  uint32_t batches = 0;    // forward passes
  uint32_t truncated = 0;  // texts cut to the context (options.truncate)
  double seconds = 0.0;
};

// Bytes one text's vector takes in `format` at `dimensions`.
size_t embed_row_bytes(EmbedFormat format, uint32_t dimensions);

// The pooled, normalized vector of hidden size `n` (already through the final norm) into
// out[row_bytes]: truncation to `dims` (re-normalized when `normalize`), then the format.
// Exposed for tests against a reference of the formats.
void embed_finish(float* vector, uint32_t n, uint32_t dims, bool normalize, EmbedFormat format, void* out,
                  float* scale);

}  // namespace tern
