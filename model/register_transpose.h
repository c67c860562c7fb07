// Transposes of 32-bit values in registers, for the kernels that turn rows into columns: 16 x 16
// in AVX-512 registers (column_blocks.cc: a prompt chunk's inputs; quantized_tiles.cc: inputs
// into B tiles and the tiles' sums back into rows), 8 x 8 in AVX2 ones (column_blocks.cc's
// blocks for the AVX2 tiles). The same three steps at either width.
#pragma once

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

namespace placer::model {

// r[i] (row i, 16 values) to r[c] (value c of the 16 rows): pairs, then quads within each
// 128-bit lane, then the lanes. Shuffles only: one vgatherdps per unit (the way column_blocks
// took before) took ~10 % of a 64-row prompt chunk's time, on one thread while the other waited
// (bench/analysis.md); so did a scatter per row in the AMX kernel's input split.
__attribute__((target("avx512f"), always_inline)) inline void Transpose16x16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  // r[4g + c]: lane L holds unit 4L + c of rows 4g .. 4g+3.
  for (int g = 0; g < 4; ++g) {
    const __m512 a = t[4 * g], b = t[4 * g + 1], c = t[4 * g + 2], d = t[4 * g + 3];
    r[4 * g + 0] = _mm512_shuffle_ps(a, c, _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * g + 1] = _mm512_shuffle_ps(a, c, _MM_SHUFFLE(3, 2, 3, 2));
    r[4 * g + 2] = _mm512_shuffle_ps(b, d, _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * g + 3] = _mm512_shuffle_ps(b, d, _MM_SHUFFLE(3, 2, 3, 2));
  }
  // Unit 4L + c: lane L of r[c], r[4 + c], r[8 + c], r[12 + c].
  for (int c = 0; c < 4; ++c) {
    const __m512 low01 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x44);
    const __m512 high01 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xEE);
    const __m512 low23 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x44);
    const __m512 high23 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xEE);
    t[c] = _mm512_shuffle_f32x4(low01, low23, 0x88);
    t[4 + c] = _mm512_shuffle_f32x4(low01, low23, 0xDD);
    t[8 + c] = _mm512_shuffle_f32x4(high01, high23, 0x88);
    t[12 + c] = _mm512_shuffle_f32x4(high01, high23, 0xDD);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// r[i] (row i, 8 values) to r[c] (value c of the 8 rows): Transpose16x16's pairs and quads
// within each 128-bit lane, then the two lanes.
__attribute__((target("avx2"), always_inline)) inline void Transpose8x8(__m256 r[8]) {
  __m256 t[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  __m256 q[8];
  for (int g = 0; g < 2; ++g) {
    const __m256 a = t[4 * g], b = t[4 * g + 1], c = t[4 * g + 2], d = t[4 * g + 3];
    q[4 * g + 0] = _mm256_shuffle_ps(a, c, _MM_SHUFFLE(1, 0, 1, 0));
    q[4 * g + 1] = _mm256_shuffle_ps(a, c, _MM_SHUFFLE(3, 2, 3, 2));
    q[4 * g + 2] = _mm256_shuffle_ps(b, d, _MM_SHUFFLE(1, 0, 1, 0));
    q[4 * g + 3] = _mm256_shuffle_ps(b, d, _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm256_permute2f128_ps(q[c], q[4 + c], 0x20);
    r[4 + c] = _mm256_permute2f128_ps(q[c], q[4 + c], 0x31);
  }
}

}  // namespace placer::model
