// exp for 16 float32 lanes with AVX-512F, shared by the kernels that need it in registers
// (silu_times.cc's SiLU, the sampler's softmax weights).
#pragma once

#include <immintrin.h>

namespace placer::model {

// exp(x) for 16 floats: x = n ln2 + r, |r| <= ln2 / 2, exp(r) by its Taylor polynomial to r^7
// (relative error below 1e-8 there), times 2^n by vscalefps (which gives infinity past the
// float range and zero, through denormals, below it). A NaN lane comes out as exp(100), +inf
// (the clamp's vminps answers its second operand): callers that may see NaN mask it (SiLU's
// g / (1 + e) is NaN again; the sampler's weights set it to 0).
__attribute__((target("avx512f"), always_inline)) inline __m512 Exp16(__m512 x) {
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(100.0f)), _mm512_set1_ps(-110.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // ln2 in two parts, so n * ln2_hi is exact and r keeps its low bits.
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

}  // namespace placer::model
