// Test-side reader of bitllama2.c's bit_model.bin (layout in the model folder's README),
// written from that description independently of the converter, so the forward pass can
// be checked against the reference outputs without going through a bundle.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine/model.h"

namespace tern::testing {

struct Bitllama2cWeights {
  ModelConfig config;
  std::vector<float> final_norm;
  std::vector<float> embeddings;
  std::vector<std::vector<uint8_t>> packed;  // T2 row-major matrices
  std::vector<LayerWeights> layers;
  ModelWeights weights;
  size_t bytes = 0;
};

// Empty pointer (and a gtest failure) when the file cannot be read.
std::unique_ptr<Bitllama2cWeights> read_bitllama2c(const std::string& path);

}  // namespace tern::testing
