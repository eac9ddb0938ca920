// GGUF checkpoints (llama.cpp arch `bitnet` tq1_0/tq2_0/f16, bitnet.cpp `bitnet-b1.58` i2_s).
//
// Conventions (see gguf_import.cpp for the reasoning):
// - GGUF dims are innermost-first, so a matrix stored with dims [in, out] is already
//   row-major [out][in], Tern's order.
// - q/k rows are NOT permuted: llama.cpp runs arch `bitnet` with NEOX (rotate-half) RoPE
//   and its converter keeps the Hugging Face row order, so RopeStyle::RotateHalf.
//   (Checked end to end: the forward pass on the shared files matches the reference logits
//   at cosine 0.9993; with q/k permuted as for llama-arch GGUF it drops to 0.84.)
// - Ternary scales use the multiply convention (weight = code * scale): tq1_0/tq2_0 block
//   scales and the i2_s tensor scale are all the block/tensor absmax, i.e. s itself.
//   tq1_0/tq2_0 blocks must share one scale within f16 precision (all-zero blocks aside).
// - i2_s is decoded in the layout bitnet.cpp writes on x86 (128-weight blocks, 32 bytes,
//   weight j at byte j % 32, bits 6 - 2*(j/32)). Its ARM build packs 64-weight blocks under
//   the same type id; nothing in the file tells them apart, so such files decode wrongly.
// - Activation: `<arch>.hidden_activation` when present; otherwise relu² for bitnet-b1.58
//   (bitnet.cpp's 2B-4T) and SiLU for `bitnet` (upstream llama.cpp's 1bitLLM models).
// - Tokenizer: "gpt2" -> byte-level BPE with the GPT-2 byte spelling undone; only the
//   llama-bpe/llama3 pre-tokenizer is accepted (others would split text differently with
//   no error). "llama" -> SentencePiece BPE with scores. Control/user-defined tokens keep
//   their literal text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "converter/import/gguf.h"
#include "converter/ir/convert_options.h"
#include "converter/ir/model_ir.h"
#include "platform/error.h"

namespace tern::convert {

Result<ModelIR> import_gguf(const std::string& path, const ConvertOptions& options);

// The same on an already parsed file (the fuzzer and tests use in-memory files).
Result<ModelIR> import_gguf(const gguf::File& file, const ConvertOptions& options);

// Decoders, exposed for tests. Both produce row-major [dims[1]...][dims[0]] order.
// Float: f32, f16, bf16, q8_0, q6_K.
Result<std::vector<float>> gguf_decode_float(const gguf::File& file, const gguf::TensorInfo& tensor);
// Ternary: tq1_0, tq2_0, i2_s (x86 128-weight blocks), or f32/f16/bf16 holding {-s, 0, +s}.
struct TernaryTensor {
  std::vector<int8_t> codes;
  float scale = 0.0f;
};
Result<TernaryTensor> gguf_decode_ternary(const gguf::File& file, const gguf::TensorInfo& tensor);

// tokenizer.ggml.* metadata: "gpt2" (byte-level BPE) or "llama" (SentencePiece).
Result<TokenizerIR> gguf_import_tokenizer(const gguf::File& file);

// GPT-2's printable-unicode spelling of bytes, undone: "Ġhello" -> " hello". False when a
// character is not one of the 256 the mapping produces.
bool gpt2_unicode_to_bytes(const std::string& text, std::string* bytes);

}  // namespace tern::convert
