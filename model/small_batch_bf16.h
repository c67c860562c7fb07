// x @ weight^T for the few rows of a decode step over BF16 weights stored [out, in]
// (nn.Linear), reading each weight byte once for all the step's rows (small_batch_linear.h
// says why BLAS does not). BF16 checkpoints are served as they are (--dtype auto), so this is
// the product every decode step of such a model spends its time in.
//
// Each product is bf16 x bf16 exactly in float32 (8-bit significands), accumulated in float32
// over `in` in one fixed order per output, then rounded to BF16 once (bias added in float32):
//   kAvx512Bf16: vdpbf16ps, 32 weights per instruction (AVX512-BF16);
//   kAvx512:     BF16 widened to float32 by a shift, FMA over 16 lanes (AVX-512F);
//   kAvx2:       the same over 8 lanes (AVX2 + FMA).
// Batch invariance, as for the float32 kernels: a row's result does not depend on the other
// rows of the call nor on its position among them.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace placer::model {

enum class Bf16Isa { kNone, kAvx2, kAvx512, kAvx512Bf16 };

// The best of them this CPU runs (checked once).
Bf16Isa DetectBf16Isa();
// Every one this CPU runs, best first (for tests and the bench).
std::vector<Bf16Isa> RunnableBf16Isas();
const char* Bf16IsaName(Bf16Isa isa);

// Input rows up to which the kernels are used; prompt chunks go to the BF16 prompt-chunk kernel
// (prompt_chunk_bf16.h) with AVX512-BF16, to float32 sgemm on AVX2 alone, where ATen's BF16
// GEMM has no vector path (widened_bf16_linear.h), else to ATen's BF16 GEMM (oneDNN).
int64_t SmallBatchBf16MaxRows(Bf16Isa isa);

// Whether ATen's BF16 GEMM has a vector path on this CPU: oneDNN's BF16 kernels need AVX-512;
// below it ATen runs a scalar loop (seconds for one 64-row pass of the small preset's layers),
// so nothing here sends BF16 rows to it and the bench does not time it.
bool AtenBf16GemmIsVectorized();

// True when x ([..., in]) and weight ([out, in], contiguous) are BF16 CPU tensors and bias is
// undefined or a contiguous BF16 / float32 [out].
bool SmallBatchBf16Applies(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// x @ weight^T + bias in BF16 with the kernels of `isa` (not kNone), on SpinningWorkers.
// Requires SmallBatchBf16Applies and a CPU that runs `isa`.
at::Tensor SmallBatchLinearBf16(const at::Tensor& x, const at::Tensor& weight,
                                const at::Tensor& bias, Bf16Isa isa);

// x times each weight (+ its bias, or none where undefined) in one parallel loop over every
// weight's outputs (a decode step's q, k and v: one wait for the slowest thread, not three).
// Result i is bit for bit SmallBatchLinearBf16(x, weights[i], biases[i], isa).
std::vector<at::Tensor> SmallBatchLinearsBf16(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                              const std::vector<at::Tensor>& biases, Bf16Isa isa);

}  // namespace placer::model
