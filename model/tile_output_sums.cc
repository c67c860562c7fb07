#include "model/tile_output_sums.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see small_batch_out_in.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>

#include "model/register_transpose.h"

namespace placer::model {

__attribute__((target("avx512f"))) void StoreTileOutputSums(const QuantOperands& op,
                                                            const float* sums, int64_t columns,
                                                            int64_t s0, int64_t count) {
  constexpr int64_t kSide = 16;  // outputs and rows per transpose
  for (int64_t first = 0; first < count; first += kSide) {
    const int64_t width = std::min(kSide, count - first);
    const auto mask = static_cast<__mmask16>((uint32_t{1} << width) - 1);
    const __m512 bias = op.bias != nullptr ? _mm512_maskz_loadu_ps(mask, op.bias + s0 + first)
                                           : _mm512_setzero_ps();
    for (int64_t r0 = 0; r0 < op.rows; r0 += kSide) {
      __m512 r[16];
      for (int64_t i = 0; i < 16; ++i) {
        r[i] = i < width ? _mm512_loadu_ps(sums + (first + i) * columns + r0) : _mm512_setzero_ps();
      }
      Transpose16x16(r);
      for (int64_t c = 0; c < std::min(kSide, op.rows - r0); ++c) {
        _mm512_mask_storeu_ps(op.y + (r0 + c) * op.out + s0 + first, mask,
                              _mm512_add_ps(r[c], bias));
      }
    }
  }
}

}  // namespace placer::model

#pragma GCC diagnostic pop
