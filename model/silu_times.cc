#include "model/silu_times.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see prompt_chunk_linear.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "model/bf16_rounding.h"
#include "model/vector_exp.h"

namespace placer::model {
namespace {

__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512 Silu(__m512 g) {
  const __m512 e = Exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
  return _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void SiluTimesBf16(const uint16_t* gate, const uint16_t* up,
                                                     uint16_t* out, int64_t count) {
  for (int64_t i = 0; i < count; i += 16) {
    const int64_t left = count - i;
    const auto mask = static_cast<__mmask16>(left >= 16 ? 0xFFFF : (1u << left) - 1);
    const __m512 g = WidenBf16Bits(_mm256_maskz_loadu_epi16(mask, gate + i));
    const __m512 u = WidenBf16Bits(_mm256_maskz_loadu_epi16(mask, up + i));
    const __m512 product = _mm512_mul_ps(RoundThroughBf16(Silu(g)), u);
    _mm256_mask_storeu_epi16(out + i, mask, RoundToBf16Bits(product));
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
