// The row loop of the x86 integer q8/q4 GEMVs (dense_gemv_i8__{avx2,avx512vnni}.cpp). Every
// function is a template on the including file's dot-product traits `D` (defined in that
// file's anonymous namespace), so each instantiation carries only that file's ISA flags:
//   D::q4(dot, w, xe, xo): dot + Σ (w & 15) * xe + Σ (w >> 4) * xo   (int32 lanes)
//   D::q4_unpacked(dot, lo, hi, xe, xo): the same from lo = w & 15, hi = w >> 4 (q4_low/q4_high)
//   D::q8(dot, w, x):      dot + Σ (w + kQ8Offset) * x
//   D::kQ8Offset:          what D::q8 adds to each weight (removed through Σq per group)
// Q4's stored nibbles are v + 8, so its offset is 8. The row kAheadRows further on is
// prefetched line by line.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/dense_ukernels.h"

namespace tern {
namespace dense_i8_x86 {

constexpr size_t kLine = 64;
constexpr size_t kAheadBytes =
    4096;  // prefetch distance in the row stream: 4 KB beat 2 KB once the row loop kept its sums in registers

template <typename D>
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <typename D>
inline __m256i load(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// Σ over group g of row r, in 8 int32 lanes (lane 0 carries -offset * Σq of the group).
// With G known the group is a constant number of 32-byte steps, unrolled whole.
template <typename D, bool Q4, size_t G>
inline __m256i group_dot(const uint8_t* row, const DenseActivationsI8& x, size_t g, size_t group_bytes) {
  constexpr int32_t offset = Q4 ? 8 : D::kQ8Offset;
  constexpr size_t kGroupBytes = Q4 ? G / 2 : G;
  const size_t bytes = G != 0 ? kGroupBytes : group_bytes;
  const uint8_t* w = row + g * bytes;
  const int8_t* q = x.q + (Q4 ? 2 : 1) * g * bytes;
  __m256i dot = _mm256_setr_epi32(-offset * x.sums[g], 0, 0, 0, 0, 0, 0, 0);
  // Unrolled: as a loop the group-64 body ran at 11 GB/s from L3 (q4, AVX2), unrolled at 18.
#pragma GCC unroll 4
  for (size_t b = 0; b < bytes; b += 32) {
    if (Q4) {
      dot = D::q4(dot, load<D>(w + b), load<D>(q + 2 * b), load<D>(q + 2 * b + 32));
    } else {
      dot = D::q8(dot, load<D>(w + b), load<D>(q + b));
    }
  }
  return dot;
}

// The sums of eight groups' vectors, group k's in lane k: per 128-bit half, [d0 d1 d2 d3] and
// [d4 d5 d6 d7] partial sums (HADD tree); the halves add up.
template <typename D>
inline __m256i group_sums(__m256i d0, __m256i d1, __m256i d2, __m256i d3, __m256i d4, __m256i d5, __m256i d6,
                          __m256i d7) {
  const __m256i t0 = _mm256_hadd_epi32(_mm256_hadd_epi32(d0, d1), _mm256_hadd_epi32(d2, d3));
  const __m256i t1 = _mm256_hadd_epi32(_mm256_hadd_epi32(d4, d5), _mm256_hadd_epi32(d6, d7));
  return _mm256_add_epi32(_mm256_permute2x128_si256(t0, t1, 0x20), _mm256_permute2x128_si256(t0, t1, 0x31));
}

// The sum of a vector's eight int32 lanes.
template <typename D>
inline int32_t lane_sum(__m256i d) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256(d, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// Prefetches the row's bytes of groups [g, g + 8) kAheadBytes further on.
template <typename D>
inline void prefetch_eight_groups(const uint8_t* row, size_t g, size_t group_bytes) {
  for (size_t b = g * group_bytes; b < (g + 8) * group_bytes; b += kLine)
    _mm_prefetch(reinterpret_cast<const char*>(row + kAheadBytes + b), _MM_HINT_T0);
}

// One row at a time: the matrix is row-major, so this reads one sequential stream (four
// rows side by side were four streams, and Zen 4 fed them at half the bandwidth: q8 lm_head
// 25 ms -> 17 ms). Eight groups' sums, eight independent chains kept in registers, are
// folded into one vector of 8 (HADD tree) and scaled by the row's 8 group scales at once,
// instead of a scalar scale, broadcast and FMA per group. (With the eight-group loop left
// rolled, GCC kept the sums on the stack and the q4 lm_head of 2B-4T ran at ~70 ns a row
// from L2, compute-bound.) G: the group size when known at compile time (the converter's
// default 64, and 128), 0 for any other.
template <typename D, bool Q4, size_t G>
float row_i8(const DenseMatrix& m, const DenseActivationsI8& x, size_t r) {
  const size_t group = G != 0 ? G : m.group;
  const size_t group_bytes = Q4 ? group / 2 : group;
  const size_t groups = m.cols / group;
  const size_t row_bytes = Q4 ? m.cols / 2 : m.cols;
  const uint8_t* row = static_cast<const uint8_t*>(m.data) + r * row_bytes;
  const float* wscales = m.scales + r * groups;
  const bool prefetch = (r + 1) * row_bytes + kAheadBytes <= m.rows * row_bytes;
  __m256 acc = _mm256_setzero_ps();
  size_t g = 0;
  for (; g + 8 <= groups; g += 8) {
    if (prefetch) prefetch_eight_groups<D>(row, g, group_bytes);
    const __m256i d0 = group_dot<D, Q4, G>(row, x, g, group_bytes);
    const __m256i d1 = group_dot<D, Q4, G>(row, x, g + 1, group_bytes);
    const __m256i d2 = group_dot<D, Q4, G>(row, x, g + 2, group_bytes);
    const __m256i d3 = group_dot<D, Q4, G>(row, x, g + 3, group_bytes);
    const __m256i d4 = group_dot<D, Q4, G>(row, x, g + 4, group_bytes);
    const __m256i d5 = group_dot<D, Q4, G>(row, x, g + 5, group_bytes);
    const __m256i d6 = group_dot<D, Q4, G>(row, x, g + 6, group_bytes);
    const __m256i d7 = group_dot<D, Q4, G>(row, x, g + 7, group_bytes);
    const __m256i sums = group_sums<D>(d0, d1, d2, d3, d4, d5, d6, d7);
    const __m256 scale = _mm256_mul_ps(_mm256_loadu_ps(wscales + g), _mm256_loadu_ps(x.scales + g));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, acc);
  }
  float y = hsum<D>(acc);
  for (; g < groups; ++g) {
    y += static_cast<float>(lane_sum<D>(group_dot<D, Q4, G>(row, x, g, group_bytes))) * (wscales[g] * x.scales[g]);
  }
  return y;
}

template <typename D, bool Q4, size_t G>
void gemv_rows(const DenseMatrix& m, const DenseActivationsI8& x, float* y, size_t r0, size_t r1) {
  for (size_t r = r0; r < r1; ++r) y[r] = row_i8<D, Q4, G>(m, x, r);
}

template <typename D, bool Q4>
void gemv_any_group(const DenseMatrix& m, const DenseActivationsI8& x, float* y, size_t r0, size_t r1) {
  switch (m.group) {
    case 64: return gemv_rows<D, Q4, 64>(m, x, y, r0, r1);
    case 128: return gemv_rows<D, Q4, 128>(m, x, y, r0, r1);
    default: return gemv_rows<D, Q4, 0>(m, x, y, r0, r1);
  }
}

// The low and high nibbles of 32 q4 weight bytes, as unsigned bytes.
template <typename D>
inline __m256i q4_low(__m256i w) {
  return _mm256_and_si256(w, _mm256_set1_epi8(0x0f));
}
template <typename D>
inline __m256i q4_high(__m256i w) {
  return _mm256_and_si256(_mm256_srli_epi16(w, 4), _mm256_set1_epi8(0x0f));
}

// Q4 rows for N tokens at once: each group of 8 weight groups is loaded and unpacked once and
// then serves every token, where row_i8 unpacks it again per token (the lm_head of several
// rows was bound by that unpacking, not by reading the weights). Each token's arithmetic is
// row_i8's: its group sums are exact integers, then the same scaling, FMA chain, horizontal sum
// and tail in the same order, so every output equals the token's own GEMV bit for bit.
// G: 64 or 128 (a group is G / 64 steps of 32 weight bytes).
template <typename D, size_t G, size_t N>
void rows_q4_tokens(const DenseMatrix& m, const DenseActivationsI8* x, float* const* y, size_t r0, size_t r1) {
  constexpr size_t kSteps = G / 64;
  constexpr size_t kGroupBytes = G / 2;
  const size_t groups = m.cols / G;
  const size_t row_bytes = m.cols / 2;
  for (size_t r = r0; r < r1; ++r) {
    const uint8_t* row = static_cast<const uint8_t*>(m.data) + r * row_bytes;
    const float* wscales = m.scales + r * groups;
    const bool prefetch = (r + 1) * row_bytes + kAheadBytes <= m.rows * row_bytes;
    __m256 acc[N];
    for (size_t t = 0; t < N; ++t) acc[t] = _mm256_setzero_ps();
    size_t g = 0;
    for (; g + 8 <= groups; g += 8) {
      if (prefetch) prefetch_eight_groups<D>(row, g, kGroupBytes);
      // Unpacked once into L1; every token reloads them (loads are cheap, registers are not).
      alignas(32) __m256i lo[8][kSteps], hi[8][kSteps];
      for (size_t k = 0; k < 8; ++k) {
        for (size_t s = 0; s < kSteps; ++s) {
          const __m256i w = load<D>(row + (g + k) * kGroupBytes + 32 * s);
          _mm256_store_si256(&lo[k][s], q4_low<D>(w));
          _mm256_store_si256(&hi[k][s], q4_high<D>(w));
        }
      }
      const __m256 ws = _mm256_loadu_ps(wscales + g);
#pragma GCC unroll 1
      for (size_t t = 0; t < N; ++t) {
        __m256i d[8];
        for (size_t k = 0; k < 8; ++k) {
          const int8_t* q = x[t].q + 2 * (g + k) * kGroupBytes;
          d[k] = _mm256_setr_epi32(-8 * x[t].sums[g + k], 0, 0, 0, 0, 0, 0, 0);
          for (size_t s = 0; s < kSteps; ++s) {
            d[k] = D::q4_unpacked(d[k], _mm256_load_si256(&lo[k][s]), _mm256_load_si256(&hi[k][s]), load<D>(q + 64 * s),
                                  load<D>(q + 64 * s + 32));
          }
        }
        const __m256i sums = group_sums<D>(d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]);
        const __m256 scale = _mm256_mul_ps(ws, _mm256_loadu_ps(x[t].scales + g));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, acc[t]);
      }
    }
    for (size_t t = 0; t < N; ++t) {
      float v = hsum<D>(acc[t]);
      for (size_t gt = g; gt < groups; ++gt) {
        v += static_cast<float>(lane_sum<D>(group_dot<D, true, G>(row, x[t], gt, kGroupBytes))) *
             (wscales[gt] * x[t].scales[gt]);
      }
      y[t][r] = v;
    }
  }
}

template <typename D, size_t G>
void q4_tokens_by_fours(const DenseMatrix& m, const DenseActivationsI8* x, size_t n, float* const* y, size_t r0,
                        size_t r1) {
  size_t t = 0;
  for (; t + 4 <= n; t += 4) rows_q4_tokens<D, G, 4>(m, x + t, y + t, r0, r1);
  switch (n - t) {
    case 3: return rows_q4_tokens<D, G, 3>(m, x + t, y + t, r0, r1);
    case 2: return rows_q4_tokens<D, G, 2>(m, x + t, y + t, r0, r1);
    case 1: return rows_q4_tokens<D, G, 1>(m, x + t, y + t, r0, r1);
    default: return;
  }
}

template <typename D>
void gemv(const DenseMatrix& m, const DenseActivationsI8& x, float* y, size_t r0, size_t r1);

// n tokens over rows [r0, r1): q4 with 64- or 128-column groups through rows_q4_tokens, up to
// four tokens a pass; anything else one token after the other.
template <typename D>
void gemv_tokens(const DenseMatrix& m, const DenseActivationsI8* x, size_t n, float* const* y, size_t r0, size_t r1) {
  if (m.type == DenseType::Q4 && m.group == 64) return q4_tokens_by_fours<D, 64>(m, x, n, y, r0, r1);
  if (m.type == DenseType::Q4 && m.group == 128) return q4_tokens_by_fours<D, 128>(m, x, n, y, r0, r1);
  for (size_t t = 0; t < n; ++t) gemv<D>(m, x[t], y[t], r0, r1);
}

template <typename D>
void gemv(const DenseMatrix& m, const DenseActivationsI8& x, float* y, size_t r0, size_t r1) {
  if (m.type == DenseType::Q4) return gemv_any_group<D, true>(m, x, y, r0, r1);
  gemv_any_group<D, false>(m, x, y, r0, r1);
}

}  // namespace dense_i8_x86
}  // namespace tern
