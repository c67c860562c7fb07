#include "model/silu_times.h"

// GCC 12's AVX-512 intrinsics warn about themselves (see prompt_chunk_linear.cc).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(PLACER_HAVE_SLEEF)
// SLEEF's 8-lane expf, 1-ulp, the dispatching entry ATen's AVX2 Vectorized<float>::exp calls.
// Declared here: sleef.h declares it only where __AVX__ is defined at its (first) inclusion, and
// this file, like every kernel here, is built for the baseline CPU and picks AVX2 at run time.
extern "C" __m256 Sleef_expf8_u10(__m256);
#endif

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

#if defined(PLACER_HAVE_SLEEF)
// ATen's float32 silu, x / (1 + exp(-x)) with -x a sign flip and exp SLEEF's 1-ulp expf, and
// its product, lane for lane as Vectorized<float> computes them; fused, one pass, no
// intermediate tensor. SLEEF's expf8_u10 (AVX2) and expf16_u10 (AVX-512, ATen's other
// kernel) are its deterministic FMA forms, which return the same bits at every vector width.
__attribute__((target("avx2,fma"))) void SiluTimesF32(const float* gate, const float* up, float* out,
                                                      int64_t count) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 one = _mm256_set1_ps(1.0f);
  for (int64_t i = 0; i < count; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, Sleef_expf8_u10(_mm256_xor_ps(g, sign))));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
}
#endif

// Whether ATen's own float32 silu takes SLEEF's vector exp for every element of `count`: its
// AVX2 or AVX-512 kernel (not the scalar one ATEN_CPU_CAPABILITY=default forces), in one serial
// loop (under ATen's grain of 32768, no split among threads) of whole 2 x 16 lanes (its scalar
// remainder calls std::exp, whose last bits differ).
bool AtenSiluIsVectorExp(int64_t count) {
  static const bool vector_kernel = [] {
    __builtin_cpu_init();
    const char* forced = std::getenv("ATEN_CPU_CAPABILITY");
    const bool forced_default = forced != nullptr && std::strcmp(forced, "default") == 0;
    return !forced_default && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return vector_kernel && count % 32 == 0 && count < 32768;
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

bool SiluTimesFusesFloat32(const at::Tensor& gate, const at::Tensor& up) {
#if defined(PLACER_HAVE_SLEEF)
  return gate.device().is_cpu() && up.device().is_cpu() && gate.layout() == at::kStrided &&
         up.layout() == at::kStrided && gate.scalar_type() == at::kFloat &&
         up.scalar_type() == at::kFloat && gate.sizes() == up.sizes() && gate.is_contiguous() &&
         up.is_contiguous() && gate.numel() > 0 && AtenSiluIsVectorExp(gate.numel());
#else
  (void)gate;
  (void)up;
  return false;
#endif
}

at::Tensor SiluTimes(const at::Tensor& gate, const at::Tensor& up) {
#if defined(PLACER_HAVE_SLEEF)
  if (SiluTimesFusesFloat32(gate, up)) {
    at::Tensor out = at::empty(gate.sizes(), gate.options());
    SiluTimesF32(gate.data_ptr<float>(), up.data_ptr<float>(), out.data_ptr<float>(), gate.numel());
    return out;
  }
#endif
  if (!Applies(gate, up)) return at::silu(gate) * up;
  at::Tensor out = at::empty_like(gate);
  SiluTimesBf16(reinterpret_cast<const uint16_t*>(gate.data_ptr<at::BFloat16>()),
                reinterpret_cast<const uint16_t*>(up.data_ptr<at::BFloat16>()),
                reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>()), gate.numel());
  return out;
}

}  // namespace placer::model

#pragma GCC diagnostic pop
