// silu(gate) * up, the gated activation of Llama's MLP, in one pass on the CPU in BF16.
//
// ATen's at::silu(gate) * up makes two tensors and, past 32K elements, two OpenMP loops, each of
// which wakes the (passive) pool: for a 64-row prompt chunk of the small preset in BF16, 0.36
// ms per layer. This loop runs on the calling thread, 16 elements per step (AVX-512F/BW/VL)
// (bench/analysis.md "BF16 prompt chunks").
//
// Arithmetic: silu(g) = g / (1 + exp(-g)) in float32, exp to about 2 ulp (a degree-7 polynomial,
// scaled by 2^n; overflow to infinity and underflow to zero as exp does); the activation
// rounded to BF16 once before the product and the product once after it (ATen's BF16 silu also
// rounds exp(-g) and 1 + exp(-g) to BF16: further from the exact value than this). The same for
// a row alone or in any batch (an element depends on its own gate and up only).
//
// Float32: ATen's silu and product fused into one pass, bit for bit (the int8-activation e2e
// test's greedy tokens were checked against those last bits: a one-ulp change of an activation
// there moved an int8 code and flipped a near-tied token), where ATen's own kernel takes SLEEF's
// vector exp for every element (AVX2 CPU, whole multiples of 32 elements under 32768: a
// decode step's rows) and placer was built with SLEEF (Debian's libsleef-dev); else ATen's two
// operations. In a small-preset decode step they were ~2.4 % of the calling thread's samples,
// half of it building and dispatching the two operations (bench/analysis.md).
#pragma once

#include <ATen/ATen.h>

namespace placer::model {

// True when this CPU runs the loop (AVX-512F, BW and VL).
bool SiluTimesRuns();

// True when SiluTimes(gate, up) takes the fused float32 pass (the conditions above).
bool SiluTimesFusesFloat32(const at::Tensor& gate, const at::Tensor& up);

// silu(gate) * up: the BF16 loop for same-shaped contiguous BF16 CPU tensors where it runs, the
// fused float32 pass where it applies, else ATen's operations (GPU tensors, other dtypes,
// strided views).
at::Tensor SiluTimes(const at::Tensor& gate, const at::Tensor& up);

}  // namespace placer::model
