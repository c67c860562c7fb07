#include "model/prompt_chunk_avx2.h"

#include <immintrin.h>

#include <algorithm>

#include "model/column_blocks.h"

namespace placer::model {
namespace {

// T weight rows times J x 8 input rows starting at block row 8 * j0: as prompt_chunk_linear.cc's
// AVX-512 tile, on 8 lanes.
template <int J, int T>
__attribute__((target("avx2,fma"), always_inline)) inline void Tile(const PromptChunkBlock& b, int64_t j0,
                                                                    const float* w, const float* bias,
                                                                    float* outputs, PrefetchStream ahead) {
  __m256 acc[T][J];
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    _Pragma("GCC unroll 4") for (int j = 0; j < J; ++j) acc[t][j] = _mm256_setzero_ps();
  }
  const int64_t in = b.in;
  const float* xt = b.xt + j0 * in * 8;
  for (int64_t k = 0; k < in; ++k) {
    _mm_prefetch(ahead.LineAt(k), _MM_HINT_T1);
    __m256 xv[J];
    _Pragma("GCC unroll 4") for (int j = 0; j < J; ++j) {
      xv[j] = _mm256_load_ps(xt + (j * in + k) * 8);
    }
    _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
      const __m256 wt = _mm256_broadcast_ss(w + t * in + k);
      _Pragma("GCC unroll 4") for (int j = 0; j < J; ++j) {
        acc[t][j] = _mm256_fmadd_ps(wt, xv[j], acc[t][j]);
      }
    }
  }
  // Unrolled, so every accumulator has a fixed register: indexed at run time here, GCC kept the
  // array in memory and stored all 12 vectors on every step of the loop above.
  alignas(32) float lanes[T][J][8];
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    _Pragma("GCC unroll 4") for (int j = 0; j < J; ++j) _mm256_store_ps(lanes[t][j], acc[t][j]);
  }
  for (int t = 0; t < T; ++t) {
    const float add = bias != nullptr ? bias[t] : 0.0f;
    for (int j = 0; j < J; ++j) {
      const int64_t first = 8 * (j0 + j);
      const int64_t valid = std::min<int64_t>(8, b.rows - first);
      for (int64_t l = 0; l < valid; ++l) outputs[(first + l) * b.outputs_stride + t] = lanes[t][j][l] + add;
    }
  }
}

// Block rows [8 j0, 8 (j0 + J)) against every weight row of the task.
template <int J>
__attribute__((target("avx2,fma"))) void Pass(const PromptChunkBlock& b, int64_t j0) {
  constexpr int T = 12 / J;
  const TaskPrefetches prefetches(b.dense_rows, b.dense_row_bytes, b.n0, b.n1, T, b.in, b.block,
                                  b.source, b.out);
  const auto bias = [&](int64_t n) { return b.bias != nullptr ? b.bias + (n - b.n0) : nullptr; };
  int64_t n = b.n0;
  for (; n + T <= b.n1; n += T) {
    Tile<J, T>(b, j0, b.w + (n - b.n0) * b.in, bias(n), b.outputs + (n - b.n0), prefetches.ForTile(n, T));
  }
  for (; n < b.n1; ++n) {
    Tile<J, 1>(b, j0, b.w + (n - b.n0) * b.in, bias(n), b.outputs + (n - b.n0), prefetches.ForTile(n, 1));
  }
}

}  // namespace

void PromptChunkBlockAvx2(const PromptChunkBlock& b) {
  // Vectors of 8 rows in passes of 3 (4 weight rows a tile) and 2 (6), never leaving one alone
  // but in a block of 8 rows or fewer (12): of 3 vectors, one pass of 3 took the small preset's
  // layers at 24 rows 29-40 ms, 2 + 1 50-52 (`placer-bench-model products`).
  int64_t vectors = (b.rows + 7) / 8;
  if (vectors == 1) {
    Pass<1>(b, 0);
    return;
  }
  for (int64_t j0 = 0; vectors > 0;) {
    const int64_t j = vectors == 2 || vectors == 4 ? 2 : 3;
    j == 2 ? Pass<2>(b, j0) : Pass<3>(b, j0);
    j0 += j;
    vectors -= j;
  }
}

}  // namespace placer::model
