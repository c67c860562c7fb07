// Prompt chunks of BF16 rows over BF16 weights where ATen's BF16 GEMM has no vector path (AVX2
// alone: AtenBf16GemmIsVectorized() is false). The few-row BF16 kernel reads each weight once
// per 4 rows there, so long chunks cost it ~2.3x what the same product costs as float32 in
// OpenBLAS's sgemm: this widens the operands to float32 (exact) and multiplies them there.
//
// Promise: y = x @ weight^T + bias computed in float32 and rounded to BF16 once. Chunks that
// the F32 prompt-chunk kernel takes (PromptChunkLinearTakes: with AVX2, 17-192 rows) are its
// products, each task's 48 weight rows widened into its thread's buffer where it uses them;
// longer ones are sgemm's, the weight widened a slice of output rows at a time into a buffer
// the thread keeps, so a chunk never holds more than `max_slice_elements` widened weights (the
// default is 8 MiB of float32), whatever the weight's size.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace placer::model {

// Whether Linear gives a chunk of `rows` BF16 rows to WidenedBf16Linear: past the few-row
// kernel's rows (SmallBatchBf16MaxRows) on CPUs where ATen's BF16 GEMM is scalar.
bool WidenedBf16LinearTakes(int64_t rows);

// Requires SmallBatchBf16Applies(x, weight, bias).
at::Tensor WidenedBf16Linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             int64_t max_slice_elements = int64_t{2} << 20);

}  // namespace placer::model
