#include "model/logit_passes.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see prompt_chunk_linear.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "model/vector_exp.h"

namespace placer::model {
namespace {

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

__mmask16 TailMask(int64_t left) {
  return static_cast<__mmask16>(left >= 16 ? 0xFFFF : (1u << left) - 1);
}

__attribute__((target("avx512f"))) float LargestLogitAvx512(const float* s, int64_t n) {
  __m512 best = _mm512_set1_ps(kMinusInfinity);
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(kMinusInfinity), TailMask(n - i), s + i);
    // maxps answers its second operand when either is NaN: a NaN logit leaves `best` as it was.
    best = _mm512_max_ps(v, best);
  }
  return _mm512_reduce_max_ps(best);
}

__attribute__((target("avx512f"))) int64_t FirstIndexOfAvx512(const float* s, int64_t n,
                                                            float value) {
  const __m512 wanted = _mm512_set1_ps(value);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 tail = TailMask(n - i);
    const __mmask16 equal =
        _mm512_mask_cmp_ps_mask(tail, _mm512_maskz_loadu_ps(tail, s + i), wanted, _CMP_EQ_OQ);
    if (equal != 0) return i + __builtin_ctz(equal);
  }
  return n;
}

__attribute__((target("avx512f"))) double SoftmaxWeightsAvx512(const float* s, int64_t n,
                                                              float largest, float temperature,
                                                              float* w) {
  const __m512 best = _mm512_set1_ps(largest);
  const __m512 t = _mm512_set1_ps(temperature);
  __m512d low = _mm512_setzero_pd(), high = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 tail = TailMask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(tail, s + i);
    // NaN logits (and the lanes past the end) weigh nothing.
    const __mmask16 numbers = _mm512_mask_cmp_ps_mask(tail, v, v, _CMP_ORD_Q);
    const __m512 weight =
        _mm512_maskz_mov_ps(numbers, Exp16(_mm512_div_ps(_mm512_sub_ps(v, best), t)));
    _mm512_mask_storeu_ps(w + i, tail, weight);
    low = _mm512_add_pd(low, _mm512_cvtps_pd(_mm512_castps512_ps256(weight)));
    high = _mm512_add_pd(
        high, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(weight), 1))));
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(low, high));
}

bool CpuRunsAvx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

}  // namespace

bool LogitPassesVectorized() {
  static const bool vectorized = CpuRunsAvx512();
  return vectorized;
}

float LargestLogitScalar(const float* s, int64_t n) {
  float best = kMinusInfinity;
  for (int64_t i = 0; i < n; ++i) {
    if (s[i] > best) best = s[i];
  }
  return best;
}

int64_t FirstIndexOfScalar(const float* s, int64_t n, float value) {
  for (int64_t i = 0; i < n; ++i) {
    if (s[i] == value) return i;
  }
  return n;
}

double SoftmaxWeightsScalar(const float* s, int64_t n, float largest, float temperature,
                            float* w) {
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    w[i] = std::isnan(s[i]) ? 0.0f : std::exp((s[i] - largest) / temperature);
    total += w[i];
  }
  return total;
}

float LargestLogit(const float* s, int64_t n) {
  return LogitPassesVectorized() ? LargestLogitAvx512(s, n) : LargestLogitScalar(s, n);
}

int64_t FirstIndexOf(const float* s, int64_t n, float value) {
  return LogitPassesVectorized() ? FirstIndexOfAvx512(s, n, value) : FirstIndexOfScalar(s, n, value);
}

double SoftmaxWeights(const float* s, int64_t n, float largest, float temperature, float* w) {
  return LogitPassesVectorized() ? SoftmaxWeightsAvx512(s, n, largest, temperature, w)
                                 : SoftmaxWeightsScalar(s, n, largest, temperature, w);
}

}  // namespace placer::model

#pragma GCC diagnostic pop
