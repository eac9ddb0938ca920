// Hugging Face checkpoints: a directory with config.json and model.safetensors (or shards
// listed in model.safetensors.index.json). Handles microsoft/bitnet-b1.58-2B-4T packed
// (uint8 + weight_scale) and bf16 master weights, and 1bitLLM's LLaMA-style BitNet
// (fp16 master weights), ternarizing master weights at conversion.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "converter/ir/convert_options.h"
#include "converter/ir/model_ir.h"
#include "platform/error.h"

namespace tern::convert {

Result<ModelIR> import_hf(const std::string& dir, const ConvertOptions& options);

// BitNet b1.58 absmean ternarization: s = 1 / mean|W| (float32), codes = clamp(round(W * s),
// -1, 1). Returns the multiply-convention scale 1 / s.
float ternarize_absmean(const float* w, size_t n, int8_t* codes);

// Unpacks the 2B-4T packed layout: uint8 [out/4][in], original row r + i * out/4 in
// bits 2i..2i+1 of packed row r, value = code + 1. CorruptFile on the invalid value 3.
Error unpack_hf_bitnet(const uint8_t* packed, uint64_t out_rows, uint64_t in_cols, int8_t* codes);

}  // namespace tern::convert
