#include "model/silu_times.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see prompt_chunk_linear.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "model/vector_exp.h"

namespace placer::model {
namespace {

__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512 Silu(__m512 g) {
  const __m512 e = Exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
  return _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

// BF16 bits widened to float32 / float32 rounded to BF16 as c10::BFloat16(float): to nearest
// even on the bits, denormals kept, NaN to 0x7FC0.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512 Widen(__m256i bits) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512i RoundBits(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
  return _mm512_mask_mov_epi32(rounded, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7FC0));
}
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512 RoundToBf16(__m512 v) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(RoundBits(v), 16));
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void SiluTimesBf16(const uint16_t* gate, const uint16_t* up,
                                                     uint16_t* out, int64_t count) {
  for (int64_t i = 0; i < count; i += 16) {
    const int64_t left = count - i;
    const auto mask = static_cast<__mmask16>(left >= 16 ? 0xFFFF : (1u << left) - 1);
    const __m512 g = Widen(_mm256_maskz_loadu_epi16(mask, gate + i));
    const __m512 u = Widen(_mm256_maskz_loadu_epi16(mask, up + i));
    const __m512 product = _mm512_mul_ps(RoundToBf16(Silu(g)), u);
    _mm256_mask_storeu_epi16(out + i, mask, _mm512_cvtepi32_epi16(RoundBits(product)));
  }
}

bool Applies(const at::Tensor& gate, const at::Tensor& up) {
  return SiluTimesRuns() && gate.device().is_cpu() && up.device().is_cpu() &&
         gate.layout() == at::kStrided && up.layout() == at::kStrided &&
         gate.scalar_type() == at::kBFloat16 && up.scalar_type() == at::kBFloat16 &&
         gate.sizes() == up.sizes() && gate.is_contiguous() && up.is_contiguous();
}

}  // namespace

bool SiluTimesRuns() {
  static const bool runs = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl");
  return runs;
}

at::Tensor SiluTimes(const at::Tensor& gate, const at::Tensor& up) {
  if (!Applies(gate, up)) return at::silu(gate) * up;
  at::Tensor out = at::empty_like(gate);
  SiluTimesBf16(reinterpret_cast<const uint16_t*>(gate.data_ptr<at::BFloat16>()),
                reinterpret_cast<const uint16_t*>(up.data_ptr<at::BFloat16>()),
                reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>()), gate.numel());
  return out;
}

}  // namespace placer::model

#pragma GCC diagnostic pop
