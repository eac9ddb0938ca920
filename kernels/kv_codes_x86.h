// The code unpacking of the x86 compressed-cache attention files (kv_attention__{avx2,avx512}.cpp),
// built with AVX2 either way. Internal linkage: each file compiles its own copy with its own
// ISA flags.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace tern {
namespace {

// Codes c..c+7 of a packed row (c a multiple of 8) as floats; reads up to 8 bytes.
template <uint32_t B>
inline __m256 kv_codes8(const uint8_t* row, uint32_t c) {
  const uint8_t* p = row + (c / 8) * B;
  if (B == 8) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  } else {
    uint32_t word;
    std::memcpy(&word, p, 4);
    const __m256i shifts = _mm256_setr_epi32(0, B, 2 * B, 3 * B, 4 * B, 5 * B, 6 * B, 7 * B);
    const __m256i v = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(word)), shifts),
                                       _mm256_set1_epi32((1 << B) - 1));
    return _mm256_cvtepi32_ps(v);
  }
}

}  // namespace
}  // namespace tern
