// The sum of a vector's 8 float lanes, in one fixed order ((i + i+4) + (i+2 ...) ...), which
// the few-row kernels and decode attention rely on for batch-invariant results.
#pragma once

#include <immintrin.h>

namespace placer::model {

__attribute__((target("avx2,fma"), always_inline)) inline float HorizontalSum256(__m256 v) {
  __m128 sum = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
  sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
  return _mm_cvtss_f32(sum);
}

}  // namespace placer::model
