// Horizontal sums in one fixed order, which the few-row kernels and decode attention rely on
// for batch-invariant results.
#pragma once

#include <immintrin.h>

namespace placer::model {

// The sum of a vector's 8 float lanes: (i + i+4), then (i + i+2), then (i + i+1).
__attribute__((target("avx2,fma"), always_inline)) inline float HorizontalSum256(__m256 v) {
  __m128 sum = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
  sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
  return _mm_cvtss_f32(sum);
}

// The lane sums of sixteen vectors at once: lane L of the result is the sum of v[L]'s lanes in
// exactly the order of GCC's _mm512_reduce_add_ps (lanes i + i+8, then i + i+4, i + i+2,
// i + i+1), so a tile that sums 16 accumulators this way gives the bits a one-row tile gets
// from the intrinsic, in 45 instructions instead of ~130. Tested bit for bit against it.
__attribute__((target("avx512f"), always_inline)) inline __m512 HorizontalSums512x16(
    const __m512 (&v)[16]) {
  // The tree below leaves input slot k's sum in lane 4 (k % 4) + k / 4: slot k takes the
  // vector whose sum belongs there.
  const auto slot = [&](int k) -> const __m512& { return v[4 * (k % 4) + k / 4]; };
  __m512 eighths[8];  // lanes i + i+8 of two inputs, one per 256-bit half
  for (int m = 0; m < 8; ++m) {
    const __m512 a = slot(2 * m), b = slot(2 * m + 1);
    eighths[m] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  }
  __m512 quarters[4];  // then i + i+4: one input per 128-bit chunk
  for (int m = 0; m < 4; ++m) {
    const __m512 a = eighths[2 * m], b = eighths[2 * m + 1];
    quarters[m] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
  }
  __m512 halves[2];  // then i + i+2: two inputs per chunk
  for (int m = 0; m < 2; ++m) {
    const __m512d a = _mm512_castps_pd(quarters[2 * m]), b = _mm512_castps_pd(quarters[2 * m + 1]);
    halves[m] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                              _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  // then i + i+1: four inputs per chunk
  return _mm512_add_ps(_mm512_shuffle_ps(halves[0], halves[1], 0x88),
                       _mm512_shuffle_ps(halves[0], halves[1], 0xDD));
}

// The end of a tile of 2 weight rows x 8 input rows: y[r * out + t] = (the lane sum of
// acc[t][r] + extra's lane t * 8 + r) + bias[t], the 16 outputs as the lanes of one vector:
// bit for bit what `_mm512_reduce_add_ps(acc[t][r]) + extra + bias` gives each output alone.
__attribute__((target("avx512f,avx512dq"), always_inline)) inline void StoreTwoByEight(
    const __m512 (&acc)[2][8], __m512 extra, float bias0, float bias1, float* y, int64_t out) {
  __m512 outputs[16];
  for (int t = 0; t < 2; ++t) {
    for (int r = 0; r < 8; ++r) outputs[t * 8 + r] = acc[t][r];
  }
  const __m512 bias = _mm512_insertf32x8(_mm512_set1_ps(bias0), _mm256_set1_ps(bias1), 1);
  const __m512 result = _mm512_add_ps(_mm512_add_ps(HorizontalSums512x16(outputs), extra), bias);
  // Lane t * 8 + r goes to y[r * out + t].
  const __m512i row = _mm512_set_epi32(7, 6, 5, 4, 3, 2, 1, 0, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i column = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i index =
      _mm512_add_epi32(_mm512_mullo_epi32(row, _mm512_set1_epi32(static_cast<int>(out))), column);
  _mm512_i32scatter_ps(y, index, result, sizeof(float));
}

}  // namespace placer::model
