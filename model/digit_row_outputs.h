// What the decode digit kernels (quantized_int4_digits, quantized_int8_digits) share once a
// weight row's 16-lane sums are made: the outputs [n0, n1) of R input rows, one row's sixteen
// outputs' lanes summed together (vector_sum.h) and otherwise each output's in
// _mm512_reduce_add_ps's order (the same bits either way), plus the offsets' share, plus the
// bias, so an output's bits depend on its own row alone (batch invariance).
#pragma once

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

#include "model/quantized_kernels.h"
#include "model/vector_sum.h"

namespace placer::model {

// `Kernel::RowLanes<R>(op, inputs, r0, n, acc, offsets)` makes rows r0..r0+R-1's lane sums
// and offset terms over weight row n.
template <class Kernel, int R, class Inputs>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vnni,fma"))) void DigitRowOutputs(
    const QuantOperands& op, const Inputs& inputs, int64_t r0, int64_t n0, int64_t n1) {
  float* y = op.y + r0 * op.out;
  int64_t n = n0;
  if constexpr (R == 1) {
    for (; n + 16 <= n1; n += 16) {
      __m512 lanes[16];
      alignas(64) float offsets[16];
      _Pragma("GCC unroll 1") for (int i = 0; i < 16; ++i) {
        __m512 sum[1];
        float offset[1];
        Kernel::template RowLanes<1>(op, inputs, r0, n + i, sum, offset);
        lanes[i] = sum[0];
        offsets[i] = offset[0];
      }
      const __m512 bias = op.bias != nullptr ? _mm512_loadu_ps(op.bias + n) : _mm512_setzero_ps();
      _mm512_storeu_ps(y + n, _mm512_add_ps(_mm512_add_ps(HorizontalSums512x16(lanes),
                                                          _mm512_load_ps(offsets)), bias));
    }
  }
  for (; n < n1; ++n) {
    __m512 sums[R];
    float offsets[R];
    Kernel::template RowLanes<R>(op, inputs, r0, n, sums, offsets);
    const float bias = op.bias != nullptr ? op.bias[n] : 0.0f;
    _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r) {
      y[r * op.out + n] = (_mm512_reduce_add_ps(sums[r]) + offsets[r]) + bias;
    }
  }
}

}  // namespace placer::model
