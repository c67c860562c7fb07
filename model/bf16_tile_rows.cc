// The vector kernel over tile-order BF16 weights (bf16_tile_rows.h says what it promises).
//
// A group's k-blocks are one contiguous stream (bf16_tiles.h: per k-block the group's stripes'
// blocks in order, each output's 32 inputs in 64 bytes). The loop takes 4 k-blocks at a time
// (4 sequential streams a k-block apart): for each output its 4 weight lines are loaded once
// and multiplied with every row's 4 k-blocks into that row's accumulator, which lives in a stack
// buffer (a group's 64 outputs x rows x 16 lanes is more than the registers hold) and is
// loaded and stored once per 4 products. At the group's end each stripe's 16 accumulators per
// row become 16 outputs.
#include "model/bf16_tile_rows.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>

#include "model/bf16_rounding.h"
#include "model/register_transpose.h"

namespace placer::model {
namespace {

constexpr int64_t kStripe = 16;       // outputs per block
constexpr int64_t kKBlock = 32;       // inputs per block
constexpr int64_t kBlockValues = kStripe * kKBlock;
constexpr int64_t kGroupStripes = 4;  // stripes per group (bf16_tiles.h)

// K-blocks a visit to an output's accumulators takes: a row's accumulator is loaded and stored
// once per K products (`placer-bench-model products --threads 2`, the small preset's layers, one
// row: 6.7-7.8 ms a pass against 8.2-9.2 with a visit per k-block).
constexpr int64_t kBlocksPerVisit = 4;

// Outputs [0, outputs) of the group whose block (output 0, k-block kb) is at `w` (the group's
// k-blocks `stride` values apart), K k-blocks from kb, added into acc for R rows.
template <int R, int K>
__attribute__((target("avx512f,avx512bw,avx512bf16"), always_inline)) inline void Visit(
    const Bf16TileRowsOperands& op, const uint16_t* w, int64_t stride, int64_t kb,
    int64_t outputs, __m512 (*acc)[kMostTileVectorRows]) {
  for (int64_t o = 0; o < outputs; ++o, w += kKBlock) {
    __m512bh weights[K];
    for (int k = 0; k < K; ++k) {
      // K k-blocks on: the next visit's lines. Prefetches never fault past the weight's end.
      _mm_prefetch(reinterpret_cast<const char*>(w + (K + k) * stride), _MM_HINT_T0);
      weights[k] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(w + k * stride));
    }
    for (int r = 0; r < R; ++r) {
      __m512 sum = acc[o][r];
      for (int k = 0; k < K; ++k) {
        sum = _mm512_dpbf16_ps(sum, weights[k],
                               reinterpret_cast<__m512bh>(_mm512_loadu_si512(
                                   op.x + r * op.in + (kb + k) * kKBlock)));
      }
      acc[o][r] = sum;
    }
  }
}

// One group (its last may hold fewer than 4 stripes) for every row (R of them).
template <int R>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void GroupRows(
    const Bf16TileRowsOperands& op, int64_t group) {
  const int64_t k_blocks = op.in / kKBlock, all_stripes = op.out / kStripe;
  const int64_t first_stripe = group * kGroupStripes;
  const int64_t stripes = std::min(kGroupStripes, all_stripes - first_stripe);
  const int64_t outputs = stripes * kStripe, stride = stripes * kBlockValues;
  const uint16_t* w = op.tiles + first_stripe * k_blocks * kBlockValues;
  alignas(64) __m512 acc[kGroupStripes * kStripe][kMostTileVectorRows];
  for (int64_t o = 0; o < outputs; ++o) {
    for (int r = 0; r < R; ++r) acc[o][r] = _mm512_setzero_ps();
  }
  int64_t kb = 0;
  for (; kb + kBlocksPerVisit <= k_blocks; kb += kBlocksPerVisit) {
    Visit<R, kBlocksPerVisit>(op, w + kb * stride, stride, kb, outputs, acc);
  }
  for (; kb < k_blocks; ++kb) Visit<R, 1>(op, w + kb * stride, stride, kb, outputs, acc);
  for (int64_t s = 0; s < stripes; ++s) {
    const int64_t first_output = (first_stripe + s) * kStripe;
    const __m512 bias =
        op.bias != nullptr ? _mm512_loadu_ps(op.bias + first_output) : _mm512_setzero_ps();
    for (int r = 0; r < R; ++r) {
      __m512 lanes[16];
      for (int m = 0; m < 16; ++m) lanes[m] = acc[s * kStripe + m][r];
      Transpose16x16(lanes);  // lanes[i]: lane i of the 16 outputs
      __m512 sum = lanes[0];
      for (int i = 1; i < 16; ++i) sum = _mm512_add_ps(sum, lanes[i]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(op.y + r * op.out + first_output),
                          RoundToBf16Bits(_mm512_add_ps(sum, bias)));
    }
  }
}

}  // namespace

bool Bf16TileRowsRun() {
  static const bool runs = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512bf16");
  }();
  return runs;
}

void Bf16TileRowsOfGroups(const Bf16TileRowsOperands& op, int64_t group_begin, int64_t group_end) {
  // More rows than one visit holds run in runs of kMostTileVectorRows: a row's bits do not
  // depend on the rows beside it, so the runs give what one call of them all would.
  for (int64_t first_row = 0; first_row < op.rows; first_row += kMostTileVectorRows) {
    Bf16TileRowsOperands run = op;
    run.x = op.x + first_row * op.in;
    run.y = op.y + first_row * op.out;
    run.rows = std::min(kMostTileVectorRows, op.rows - first_row);
    for (int64_t group = group_begin; group < group_end; ++group) {
      switch (run.rows) {
        case 1: GroupRows<1>(run, group); break;
        case 2: GroupRows<2>(run, group); break;
        case 3: GroupRows<3>(run, group); break;
        default: GroupRows<4>(run, group); break;
      }
    }
  }
}

}  // namespace placer::model

#pragma GCC diagnostic pop
