// BF16 linear weights in pair order, and the products that read them with `vdpbf16ps` on CPUs
// with AVX512-BF16 and no AMX (bf16_tiles.h is the AMX form).
//
// The vector kernels over a weight as bound ([out, in], small_batch_bf16.h) give each output
// 16 lanes of partial sums that end in a horizontal sum, and load every row's inputs again for
// each weight row: past one row they are bound by those loads, not by the weights' bytes (8 rows
// cost ~2.2x one row per pass of the small preset on a Zen 4 EPYC, bench/analysis.md). In pair
// order one `vdpbf16ps` multiplies a pair of inputs, broadcast from the row, by that pair of
// 16 outputs' weights: an output is one lane, no horizontal sums, an input pair loaded once per
// row for 32 outputs, and the weights one contiguous stream read once for up to 8 rows.
//
// Pair order of a weight [out, in] (out a multiple of 32, in even): groups of 32 outputs; a
// group's input pairs in order; for each pair, the 32 outputs' two weights (128 bytes). The
// tensor is BF16 [out / 32, in / 2, 32, 2], a shape no plain weight has, so the form is read
// off the tensor (IsBf16PairWeight).
//
// Each output is one float32 chain over its input pairs in order (the instruction adds a pair's
// two products to the chain), then + bias and one rounding to BF16: it depends only on its
// weight row and input row, so a row's result is the same alone, batched, or in a prompt chunk
// of any length. The sums are not bit for bit the [out, in] kernels', so a packed
// weight takes this path for good; blocks not held in host memory keep their weights as bound.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace placer::model {

// The CPU has AVX512-BF16 (with AVX-512F and BW) and PLACER_BF16_PAIRS is not "0" in the
// environment (set it to measure the vector kernels on the weights as mapped).
bool Bf16PairsRun();

// Whether a weight [out, in] has a pair order.
inline bool Bf16PairShapeFits(int64_t out, int64_t in) {
  return out > 0 && in > 0 && out % 32 == 0 && in % 2 == 0;
}

// A contiguous BF16 CPU tensor [out, in] whose shape fits, in pair order (a new tensor, in huge
// pages when large: loader/huge_page_tensor.h), packed on the calling thread and the
// SpinningWorkers.
at::Tensor PackBf16Pairs(const at::Tensor& weight);
// The inverse: [out, in] BF16, contiguous (tests).
at::Tensor UnpackBf16Pairs(const at::Tensor& pairs);

// A CPU BF16 tensor in pair order (PackBf16Pairs' shape, contiguous).
bool IsBf16PairWeight(const at::Tensor& tensor);

// x [..., in] (BF16, CPU) @ weight^T + bias (undefined, or BF16 / float32 [out]) -> BF16
// [..., out], any number of rows: 8 at a time per group of weights (read from memory for the
// first 8 and from cache for the next), 64 per parallel loop (whose inputs stay in cache; a long
// prompt chunk reads the weights once per 64 rows). On a pass of the small preset's products
// (2 threads) as fast as the [out, in] prompt-chunk kernel from 64 to 256 rows, faster below. Requires Bf16PairsRun and IsBf16PairWeight; other operands
// are refused with a c10::Error naming them.
at::Tensor Bf16PairLinear(const at::Tensor& x, const at::Tensor& pairs, const at::Tensor& bias);

// x times each weight (+ its bias, or none where undefined) in one parallel loop over every
// weight's outputs (a decode step's q, k and v: one wait for the slowest thread, not three).
// Result i is bit for bit Bf16PairLinear(x, weights[i], biases[i]).
std::vector<at::Tensor> Bf16PairLinears(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                        const std::vector<at::Tensor>& biases);

}  // namespace placer::model
