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
// BF16 only. Float32 stays on ATen's operations, bit for bit as before: their last bits are what
// the int8-activation e2e test's greedy tokens were checked against, and a one-ulp change of
// the activation moved an int8 code there and flipped a near-tied token (a prompt's rows and
// the decode steps after them attend through different kernels). No float32 gain was measured.
#pragma once

#include <ATen/ATen.h>

namespace placer::model {

// True when this CPU runs the loop (AVX-512F, BW and VL).
bool SiluTimesRuns();

// silu(gate) * up: this loop for same-shaped contiguous BF16 CPU tensors where it runs, else
// ATen's operations (float32, GPU tensors, other dtypes, strided views).
at::Tensor SiluTimes(const at::Tensor& gate, const at::Tensor& up);

}  // namespace placer::model
