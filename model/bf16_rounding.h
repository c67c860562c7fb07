// BF16 bits to float and back, 16 lanes at a time, for the AVX-512 kernels that read BF16
// operands and write BF16 outputs.
#pragma once

#include <immintrin.h>

namespace placer::model {

// 16 BF16 values (their bits) as float32: exact, as c10::BFloat16's conversion to float.
__attribute__((target("avx512f"), always_inline)) inline __m512 WidenBf16Bits(__m256i bits) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// 16 floats rounded to BF16 bits as c10::BFloat16(float) rounds them: to nearest even on the
// bits (denormals kept, unlike vcvtneps2bf16), any NaN to 0x7FC0. A kernel that stores these
// writes the bits ATen's own conversion would.
__attribute__((target("avx512f"), always_inline)) inline __m256i RoundToBf16Bits(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
  rounded = _mm512_mask_mov_epi32(rounded, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q),
                                  _mm512_set1_epi32(0x7FC0));
  return _mm512_cvtepi32_epi16(rounded);
}

// v rounded to BF16 as RoundToBf16Bits rounds it, kept as float32 for the arithmetic after it.
__attribute__((target("avx512f"), always_inline)) inline __m512 RoundThroughBf16(__m512 v) {
  return WidenBf16Bits(RoundToBf16Bits(v));
}

}  // namespace placer::model
