// The kernels for weights stored [out, in] (nn.Linear): see small_batch_linear.h.
#include <ATen/ATen.h>

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() and warn about it themselves
// (maybe-uninitialized, GCC bug 105593, fixed in GCC 13) wherever they are inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "model/keep_in_register.h"
#include "model/small_batch_kernels.h"
#include "model/stream_prefetch.h"
#include "model/vector_sum.h"

namespace placer::model {
namespace {

// Weight rows per register tile, and tiles ahead whose rows are prefetched. AVX-512: three
// rows keep the 24 accumulators of 8 input rows, 3 weight vectors and the input vector in 28 of
// the 32 registers; an 8-row tile of 3 weight rows ran at 144 GFLOP/s on one core against 110-
// 121 with 2 (weights in cache, a standalone experiment; bench/analysis.md), and memory-bound
// single rows do not care. AVX2 (16 registers): two rows for 4 input rows. Prefetching four
// tiles ahead was faster than none at 1-2 rows in a standalone experiment during development,
// but not on Zen 4, where few rows want a single stream (below).
constexpr int kTileRows512 = 3;
constexpr int kTileRows256 = 2;
constexpr int64_t kPrefetchTiles = 4;
// Up to this many input rows a tile is one weight row, prefetched kStreamPrefetchBytes ahead on
// its own stream (stream_prefetch.h): each thread's weights are then one sequential stream. On a Zen 4 EPYC the small
// preset's 1-row products took 18.3 ms in tiles of 3 rows prefetched ahead (three streams 4 KiB
// apart, three more ahead) against 10.8; equal at 4 rows, slower past them, where the
// arithmetic, not the stream, bounds the tile (bench/analysis.md, "One weight stream per
// thread"). The arithmetic of an output is the same whatever the tile.
constexpr int kOneStreamMaxRows = 2;
// Whether the AVX-512 one-stream rows prefetch their stream at all: not on the 2-vCPU Zen 4 EPYC,
// small F32 decode in process, 4 alternating rounds, each probed step against the read bandwidth
// right after it (placer-bench-model decode --read-probe-mib 256): 0.76-0.89 of that floor
// without, 0.64-0.85 with, lower in every pair; three more pairs of the two builds 0.85-0.91
// against 0.83-0.88 (bench/analysis.md, twenty-ninth session). The AVX2 rows keep theirs: no
// CPU here decodes through them.
constexpr bool kStreamPrefetch512 = false;
// Weight rows a thread walks before moving to the next input-row chunk, so the tile is still
// in cache for the second chunk (only rows beyond one chunk read it again).
constexpr int64_t kBlockBytes = 32 << 10;
// Tiles with at least this many outputs (weight rows x input rows) sum their lanes 16 outputs
// at a time; fewer would pay for a whole vector of sums.
constexpr int kLaneSumsTogetherFrom = 8;

// One tile: T weight rows (w, w + in, ...) times R input rows, written to y[r * out + t].
// Each output is one vector accumulator over `in` in order, reduced the same way whatever R
// and T are: this is what makes a row's result independent of its batch.
template <int R, int T, bool kPrefetch = true>
__attribute__((target("avx512f,avx2,fma"), always_inline)) inline void Tile512(const Operands& op,
                                                                        const float* x,
                                                                        const float* w,
                                                                        [[maybe_unused]] const float* ahead,
                                                                        float* y, int64_t n) {
  const int64_t in = op.in;
  __m512 acc[T][R];
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) acc[t][r] = _mm512_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 16 <= in; k += 16) {
    __m512 wv[T];
    _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
      wv[t] = _mm512_loadu_ps(w + t * in + k);
      if constexpr (kPrefetch) {
        _mm_prefetch(reinterpret_cast<const char*>(ahead + t * in + k), _MM_HINT_T0);
      }
    }
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
      __m512 xv = _mm512_loadu_ps(x + r * in + k);
      KeepInRegister(xv);
      _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
        acc[t][r] = _mm512_fmadd_ps(wv[t], xv, acc[t][r]);
      }
    }
  }
  if (k < in) {
    const auto mask = static_cast<__mmask16>((1u << (in - k)) - 1);
    __m512 wv[T];
    _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
      wv[t] = _mm512_maskz_loadu_ps(mask, w + t * in + k);
    }
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x + r * in + k);
      _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
        acc[t][r] = _mm512_fmadd_ps(wv[t], xv, acc[t][r]);
      }
    }
  }
  if constexpr (R * T >= kLaneSumsTogetherFrom) {
    // The tile's sums 16 at a time (HorizontalSums512x16, the intrinsic's order: every bit as
    // below). An 8-row tile of 3 weight rows is 24 sums of 12 dependent instructions each
    // against 24 fma per 16 inputs: a fifth of a 768-input tile's instructions, on the same
    // pipes as the fmas.
    constexpr int kSums = R * T, kGroups = (kSums + 15) / 16;
    alignas(64) float sums[kGroups * 16];
    _Pragma("GCC unroll 4") for (int group = 0; group < kGroups; ++group) {
      __m512 lanes[16];
      _Pragma("GCC unroll 16") for (int i = 0; i < 16; ++i) {
        const int flat = group * 16 + i;
        lanes[i] = flat < kSums ? acc[flat / R][flat % R] : _mm512_setzero_ps();
      }
      _mm512_store_ps(sums + group * 16, HorizontalSums512x16(lanes));
    }
    _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
      const float bias = op.bias != nullptr ? op.bias[n + t] : 0.0f;
      _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) y[r * op.out + t] = sums[t * R + r] + bias;
    }
  } else {
    _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
      const float bias = op.bias != nullptr ? op.bias[n + t] : 0.0f;
      _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
        y[r * op.out + t] = _mm512_reduce_add_ps(acc[t][r]) + bias;
      }
    }
  }
}

template <int R, int T, bool kPrefetch = true>
__attribute__((target("avx2,fma"), always_inline)) inline void Tile256(const Operands& op,
                                                                        const float* x,
                                                                        const float* w,
                                                                        [[maybe_unused]] const float* ahead,
                                                                        float* y, int64_t n) {
  const int64_t in = op.in;
  __m256 acc[T][R];
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) acc[t][r] = _mm256_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 8 <= in; k += 8) {
    __m256 wv[T];
    _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
      wv[t] = _mm256_loadu_ps(w + t * in + k);
      if constexpr (kPrefetch) {
        _mm_prefetch(reinterpret_cast<const char*>(ahead + t * in + k), _MM_HINT_T0);
      }
    }
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
      __m256 xv = _mm256_loadu_ps(x + r * in + k);
      KeepInRegister(xv);
      _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
        acc[t][r] = _mm256_fmadd_ps(wv[t], xv, acc[t][r]);
      }
    }
  }
  _Pragma("GCC unroll 16") for (int t = 0; t < T; ++t) {
    const float bias = op.bias != nullptr ? op.bias[n + t] : 0.0f;
    _Pragma("GCC unroll 16") for (int r = 0; r < R; ++r) {
      float sum = HorizontalSum256(acc[t][r]);
      for (int64_t tail = k; tail < in; ++tail) sum += w[t * in + tail] * x[r * in + tail];
      y[r * op.out + t] = sum + bias;
    }
  }
}

// Weight rows [n0, n1) times input rows [m, m + R), tile by tile. One function per
// instruction set: code for AVX2 must not be compiled with AVX-512 allowed.
#define PLACER_ROW_CHUNK(NAME, TARGET, TILE, TILE_ROWS, STREAM_PREFETCH)                      \
  template <int R>                                                                            \
  __attribute__((target(TARGET))) void NAME(const Operands& op, int64_t m, int64_t n0,        \
                                            int64_t n1) {                                     \
    const float* x = op.x + m * op.in;                                                        \
    float* y = op.y + m * op.out;                                                             \
    int64_t n = n0;                                                                           \
    if constexpr (R > kOneStreamMaxRows) {                                                    \
      for (; n + TILE_ROWS <= n1; n += TILE_ROWS) {                                           \
        const int64_t ahead_row = n + kPrefetchTiles * TILE_ROWS;                             \
        const float* ahead =                                                                  \
            op.weight + (ahead_row + TILE_ROWS <= op.out ? ahead_row : n) * op.in;            \
        TILE<R, TILE_ROWS>(op, x, op.weight + n * op.in, ahead, y + n, n);                    \
      }                                                                                       \
    }                                                                                         \
    const float* weight_end = op.weight + op.out * op.in;                                    \
    for (; n < n1; ++n) {                                                                     \
      const float* w = op.weight + n * op.in;                                                 \
      TILE<R, 1, STREAM_PREFETCH>(op, x, w, StreamAhead(w, op.in, weight_end), y + n, n);     \
    }                                                                                         \
  }
PLACER_ROW_CHUNK(RowChunk512, "avx512f,avx2,fma", Tile512, kTileRows512, kStreamPrefetch512)
PLACER_ROW_CHUNK(RowChunk256, "avx2,fma", Tile256, kTileRows256, true)
#undef PLACER_ROW_CHUNK

template <int R, bool kAvx512>
void RowChunk(const Operands& op, int64_t m, int64_t n0, int64_t n1) {
  if constexpr (kAvx512) {
    RowChunk512<R>(op, m, n0, n1);
  } else {
    RowChunk256<R>(op, m, n0, n1);
  }
}

template <bool kAvx512>
void WeightRowsFor(const Operands& op, int64_t n0, int64_t n1) {
  constexpr int64_t kChunk = kAvx512 ? 8 : 4;
  constexpr int64_t kTileRows = kAvx512 ? kTileRows512 : kTileRows256;
  const int64_t block = std::max<int64_t>(
      kTileRows, kBlockBytes / (op.in * static_cast<int64_t>(sizeof(float))) / kTileRows * kTileRows);
  for (int64_t start = n0; start < n1; start += block) {
    const int64_t end = std::min(n1, start + block);
    for (int64_t m = 0; m < op.rows; m += kChunk) {
      switch (std::min(kChunk, op.rows - m)) {
        case 1: RowChunk<1, kAvx512>(op, m, start, end); break;
        case 2: RowChunk<2, kAvx512>(op, m, start, end); break;
        case 3: RowChunk<3, kAvx512>(op, m, start, end); break;
        case 4: RowChunk<4, kAvx512>(op, m, start, end); break;
        case 5: RowChunk<5, kAvx512>(op, m, start, end); break;
        case 6: RowChunk<6, kAvx512>(op, m, start, end); break;
        case 7: RowChunk<7, kAvx512>(op, m, start, end); break;
        default: RowChunk<8, kAvx512>(op, m, start, end); break;
      }
    }
  }
}

}  // namespace

void OutInWeightRows(VectorIsa isa, const Operands& op, int64_t n0, int64_t n1) {
  if (isa == VectorIsa::kAvx512) {
    WeightRowsFor<true>(op, n0, n1);
  } else {
    WeightRowsFor<false>(op, n0, n1);
  }
}

}  // namespace placer::model

#pragma GCC diagnostic pop
