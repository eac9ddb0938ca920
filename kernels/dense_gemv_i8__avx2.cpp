// Integer q8/q4 GEMV, AVX2. Q8: PMADDUBSW needs one unsigned operand, so the weight's sign
// moves onto the activation (|w| * sign(x, w)); pairs reach at most 2 * 128 * 127 and do not
// saturate. Q4: the stored nibbles (v + 8, 0..15) are already unsigned; the low and high
// nibbles of 32 bytes meet the group's even and odd activations, and the +8 comes off once
// per group through the activation sum. Four rows share each activation load.
#include <immintrin.h>

#include "kernels/dense_ukernels.h"

namespace tern {
namespace {

constexpr size_t kRows = 4;
constexpr size_t kLine = 64;
constexpr size_t kAheadRows = 8;  // prefetch distance; 4-32 rows measured the same

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Rows r .. r+N-1, with rows kAheadRows further on prefetched line by line (four short
// streams restarting every row look random to the hardware prefetchers). G: the group size
// when known at compile time (the converter's default 64, and 128), 0 for any other.
template <size_t N, bool Q4, size_t G>
void rows_i8(const DenseMatrix& m, const DenseActivationsI8& x, float* y, size_t r) {
  const uint8_t* w = static_cast<const uint8_t*>(m.data);
  const size_t row_bytes = Q4 ? m.cols / 2 : m.cols;
  const size_t group = G != 0 ? G : m.group;
  const size_t group_bytes = Q4 ? group / 2 : group;
  const size_t groups = m.cols / group;
  const size_t ahead = kAheadRows;
  const bool prefetch = r + ahead + N <= m.rows;
  const __m256i ones16 = _mm256_set1_epi16(1);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  __m256 acc[N];
  for (size_t i = 0; i < N; ++i) acc[i] = _mm256_setzero_ps();
  for (size_t g = 0; g < groups; ++g) {
    if (prefetch) {
      const size_t o = g * group_bytes;  // each cache line once, from the group its start lies in
      for (size_t b = (o + kLine - 1) / kLine * kLine; b < o + group_bytes; b += kLine)
        for (size_t i = 0; i < N; ++i)
          _mm_prefetch(reinterpret_cast<const char*>(w + (r + ahead + i) * row_bytes + b), _MM_HINT_T0);
    }
    __m256i dot[N];
    // Q4: the -8 * Σq of the group, in lane 0 (the lanes are summed at the end).
    const __m256i start = _mm256_setr_epi32(Q4 ? -8 * x.sums[g] : 0, 0, 0, 0, 0, 0, 0, 0);
    for (size_t i = 0; i < N; ++i) dot[i] = start;
    // Unrolled: as a loop the group-64 body ran at 11 GB/s from L3 (q4), unrolled at 18.
#pragma GCC unroll 4
    for (size_t b = g * group_bytes; b < (g + 1) * group_bytes; b += 32) {
      if (Q4) {
        const __m256i xe = load(x.q + 2 * b), xo = load(x.q + 2 * b + 32);
        for (size_t i = 0; i < N; ++i) {
          const __m256i wv = load(w + (r + i) * row_bytes + b);
          const __m256i lo = _mm256_and_si256(wv, low4);
          const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(wv, 4), low4);
          const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xe), _mm256_maddubs_epi16(hi, xo));
          dot[i] = _mm256_add_epi32(dot[i], _mm256_madd_epi16(p, ones16));
        }
      } else {
        const __m256i xv = load(x.q + b);
        for (size_t i = 0; i < N; ++i) {
          const __m256i wv = load(w + (r + i) * row_bytes + b);
          const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(wv), _mm256_sign_epi8(xv, wv));
          dot[i] = _mm256_add_epi32(dot[i], _mm256_madd_epi16(p, ones16));
        }
      }
    }
    const float xs = x.scales[g];
    for (size_t i = 0; i < N; ++i)
      acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[i]), _mm256_set1_ps(m.scales[(r + i) * groups + g] * xs), acc[i]);
  }
  for (size_t i = 0; i < N; ++i) y[r + i] = hsum(acc[i]);
}

template <bool Q4, size_t G>
void gemv(const DenseMatrix& m, const DenseActivationsI8& x, float* y, size_t r0, size_t r1) {
  size_t r = r0;
  for (; r + kRows <= r1; r += kRows) rows_i8<kRows, Q4, G>(m, x, y, r);
  for (; r < r1; ++r) rows_i8<1, Q4, G>(m, x, y, r);
}

template <bool Q4>
void gemv_any_group(const DenseMatrix& m, const DenseActivationsI8& x, float* y, size_t r0, size_t r1) {
  switch (m.group) {
    case 64: return gemv<Q4, 64>(m, x, y, r0, r1);
    case 128: return gemv<Q4, 128>(m, x, y, r0, r1);
    default: return gemv<Q4, 0>(m, x, y, r0, r1);
  }
}

}  // namespace

void dense_gemv_i8__avx2(const DenseMatrix& m, const DenseActivationsI8& x, float* y, size_t row_begin,
                         size_t row_end) {
  if (m.type == DenseType::Q4) return gemv_any_group<true>(m, x, y, row_begin, row_end);
  gemv_any_group<false>(m, x, y, row_begin, row_end);
}

}  // namespace tern
