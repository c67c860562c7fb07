#include "model/column_blocks.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

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

// Rows in groups of 8 for the AVX2 tiles: 256 units of one group a task.
constexpr int64_t kAvx2GroupRows = 8;
constexpr int64_t kAvx2UnitsPerTask = 256;

// Units [u0, u1) of a group's `valid` rows (zeros for the other rows of its 8) into `to`, the
// group's [in][8] floats.
__attribute__((target("avx2"))) void GroupUnitsAvx2(const float* x, int64_t in, int64_t valid, int64_t u0,
                                                    int64_t u1, float* to) {
  int64_t u = u0;
  for (; u + 8 <= u1; u += 8) {
    __m256 r[8];
    for (int64_t i = 0; i < 8; ++i) r[i] = i < valid ? _mm256_loadu_ps(x + i * in + u) : _mm256_setzero_ps();
    Transpose8x8(r);
    for (int64_t c = 0; c < 8; ++c) _mm256_store_ps(to + (u + c) * kAvx2GroupRows, r[c]);
  }
  for (; u < u1; ++u) {
    for (int64_t i = 0; i < kAvx2GroupRows; ++i) to[u * kAvx2GroupRows + i] = i < valid ? x[i * in + u] : 0.0f;
  }
}

// Without AVX-512 (the AVX2 prompt-chunk tiles): each group of 8 rows with any of x's rows,
// transposed 8 x 8 in registers, spread over SpinningWorkers. Element by element on the calling
// thread, a 32-token small-preset prefill's transposes left the other thread idle for ~4 % of its
// time (bench/analysis.md). Groups wholly past `rows` are left unwritten: the AVX2 tiles take
// only the vectors of 8 rows that hold some (column_blocks.h).
void FloatRowsToColumnBlocksAvx2(const float* x, int64_t rows, int64_t in, float* out) {
  const int64_t groups = (rows + kAvx2GroupRows - 1) / kAvx2GroupRows;
  const int64_t spans = (in + kAvx2UnitsPerTask - 1) / kAvx2UnitsPerTask;
  constexpr int64_t kGroupsPerBlock = kColumnBlockRows / kAvx2GroupRows;
  const SpinningWorkers::RangeFn run = [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t group = task / spans, u0 = (task % spans) * kAvx2UnitsPerTask;
      const int64_t block = group / kGroupsPerBlock, in_block = group % kGroupsPerBlock;
      float* to = out + (block * kColumnBlockRows * in) + in_block * in * kAvx2GroupRows;
      GroupUnitsAvx2(x + group * kAvx2GroupRows * in, in, std::min(kAvx2GroupRows, rows - group * kAvx2GroupRows),
                     u0, std::min(in, u0 + kAvx2UnitsPerTask), to);
    }
  };
  if (!SpinningWorkers::Shared().TryRun(groups * spans, run)) at::parallel_for(0, groups * spans, 1, run);
}

}  // namespace

void FloatRowsToColumnBlocks(const float* x, int64_t rows, int64_t in, float* out,
                             FloatColumnBlocks layout) {
  if (layout == FloatColumnBlocks::kGroupsOf8) {
    TORCH_CHECK(__builtin_cpu_supports("avx2"), "FloatRowsToColumnBlocks: groups of 8 need AVX2");
    FloatRowsToColumnBlocksAvx2(x, rows, in, out);
    return;
  }
  TORCH_CHECK(__builtin_cpu_supports("avx512f"), "FloatRowsToColumnBlocks: rows of 64 need AVX-512F");
  RowsToColumnBlocks(x, rows, in, in, out);
}

void Bf16RowsToColumnBlocks(const uint16_t* x, int64_t rows, int64_t in, uint32_t* out) {
  RowsToColumnBlocks(x, rows, in, (in + 1) / 2, reinterpret_cast<float*>(out));
}

}  // namespace placer::model
