#include "model/column_blocks.h"

#include <ATen/Parallel.h>

// GCC 12's AVX-512 intrinsics warn about themselves (see prompt_chunk_linear.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "model/register_transpose.h"
#include "model/spinning_workers.h"

namespace placer::model {
namespace {

// Units per task of the transposes' parallel work.
constexpr int64_t kUnitsPerTask = 128;

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

// Without AVX-512 (the AVX2 prompt-chunk tiles): element by element, unit-major so the block is
// written in order; a chunk is a few hundred KiB at most, against milliseconds of products.
void FloatRowsToColumnBlocksScalar(const float* x, int64_t rows, int64_t in, float* out) {
  const int64_t blocks = (rows + kColumnBlockRows - 1) / kColumnBlockRows;
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t first = block * kColumnBlockRows;
    const int64_t valid = std::min(kColumnBlockRows, rows - first);
    float* to = out + block * in * kColumnBlockRows;
    for (int64_t group = 0; group < kColumnBlockRows / 8; ++group) {
      for (int64_t u = 0; u < in; ++u) {
        for (int64_t r = 0; r < 8; ++r) {
          const int64_t row = 8 * group + r;
          to[(group * in + u) * 8 + r] = row < valid ? x[(first + row) * in + u] : 0.0f;
        }
      }
    }
  }
}

}  // namespace

void FloatRowsToColumnBlocks(const float* x, int64_t rows, int64_t in, float* out) {
  if (!__builtin_cpu_supports("avx512f")) {
    FloatRowsToColumnBlocksScalar(x, rows, in, out);
    return;
  }
  RowsToColumnBlocks(x, rows, in, in, out);
}

void Bf16RowsToColumnBlocks(const uint16_t* x, int64_t rows, int64_t in, uint32_t* out) {
  RowsToColumnBlocks(x, rows, in, (in + 1) / 2, reinterpret_cast<float*>(out));
}

}  // namespace placer::model
