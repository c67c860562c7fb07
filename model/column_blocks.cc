#include "model/column_blocks.h"

#include <ATen/Parallel.h>

// GCC 12's AVX-512 intrinsics warn about themselves (see prompt_chunk_linear.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "model/spinning_workers.h"

namespace placer::model {
namespace {

// Units per task of the transposes' parallel work.
constexpr int64_t kUnitsPerTask = 128;

// r[i] (row i, 16 units) to r[c] (unit c of the 16 rows): pairs, then quads within each
// 128-bit lane, then the lanes. Shuffles only: one vgatherdps per unit (the way before) took ~10 %
// of a 64-row prompt chunk's time, on one thread while the other waited (bench/analysis.md).
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

// Units [u0, u0 + width) (width ≤ 16) of one row, zeros past them: masked, so nothing past the
// row is read.
__attribute__((target("avx512f"), always_inline)) inline __m512 UnitsOf(const float* row, int64_t in,
                                                                         int64_t u0, int64_t width) {
  (void)in;
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((uint32_t{1} << width) - 1), row + u0);
}
__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m512 UnitsOf(const uint16_t* row,
                                                                                  int64_t in, int64_t u0,
                                                                                  int64_t width) {
  const int64_t values = std::min(2 * width, in - 2 * u0);
  const auto mask = static_cast<__mmask32>(values == 32 ? ~uint32_t{0} : (uint32_t{1} << values) - 1);
  return _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(mask, row + 2 * u0));
}

// Units [u0, u1) of block rows [0, rows) of x into the block (see column_blocks.h).
template <typename Element>
__attribute__((target("avx512f,avx512bw"))) void UnitsToBlock(const Element* x, int64_t in, int64_t rows,
                                                               int64_t u0, int64_t u1, float* block) {
  for (int64_t first = 0; first < kColumnBlockRows; first += 16) {
    const int64_t valid = std::clamp<int64_t>(rows - first, 0, 16);
    for (int64_t u = u0; u < u1; u += 16) {
      const int64_t width = std::min<int64_t>(16, u1 - u);
      __m512 r[16];
      for (int64_t i = 0; i < 16; ++i) {
        r[i] = i < valid ? UnitsOf(x + (first + i) * in, in, u, width) : _mm512_setzero_ps();
      }
      Transpose16x16(r);
      for (int64_t c = 0; c < width; ++c) _mm512_store_ps(block + (u + c) * kColumnBlockRows + first, r[c]);
    }
  }
}

template <typename Element>
void RowsToColumnBlocks(const Element* x, int64_t rows, int64_t in, int64_t units, float* out) {
  const int64_t blocks = (rows + kColumnBlockRows - 1) / kColumnBlockRows;
  const int64_t spans = (units + kUnitsPerTask - 1) / kUnitsPerTask;
  const SpinningWorkers::RangeFn run = [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t block = task / spans, u0 = (task % spans) * kUnitsPerTask;
      UnitsToBlock(x + block * kColumnBlockRows * in, in,
                   std::min(kColumnBlockRows, rows - block * kColumnBlockRows), u0,
                   std::min(units, u0 + kUnitsPerTask), out + block * units * kColumnBlockRows);
    }
  };
  if (!SpinningWorkers::Shared().TryRun(blocks * spans, run)) at::parallel_for(0, blocks * spans, 1, run);
}

}  // namespace

void FloatRowsToColumnBlocks(const float* x, int64_t rows, int64_t in, float* out) {
  RowsToColumnBlocks(x, rows, in, in, out);
}

void Bf16RowsToColumnBlocks(const uint16_t* x, int64_t rows, int64_t in, uint32_t* out) {
  RowsToColumnBlocks(x, rows, in, (in + 1) / 2, reinterpret_cast<float*>(out));
}

}  // namespace placer::model
