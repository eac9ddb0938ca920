// Quantizes f32 embeddings / lm_head rows into the q8 and q4 layouts the dense kernels read
// (kernels/dense_matmul.h): per row, groups of `group` columns, one f32 scale each (absmax
// / 127 or / 7, round half to even), q4 as two's-complement-free nibbles v + 8, low first.
// Host-only: the converter writes these; the runtime only reads them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern::convert {

void quantize_dense_q8(const float* w, size_t rows, size_t cols, size_t group, int8_t* q, float* scales);
void quantize_dense_q4(const float* w, size_t rows, size_t cols, size_t group, uint8_t* q, float* scales);

}  // namespace tern::convert
