// A layer's row-wise arithmetic between its products: RMSNorm and the residual add, over
// contiguous float32 or BF16 rows, with AVX-512 where the CPU has it and a prompt chunk's rows
// spread over the products' helper threads (SpinningWorkers).
//
// Why: in a prompt chunk these ran on the calling thread alone (the add through ATen, whose
// parallel loop wakes OpenMP's threads beside the spinning helpers) while the helper waited:
// a small-preset int4 prefill of 64 tokens spent ~5 % of the calling thread's time in the
// scalar RMSNorm loop and ~2 % in the adds (perf, bench/analysis.md).
//
// Promise: the same bits as the scalar code (RMSNorm: 16 interleaved float32 partial sums of
// squares in a fixed order, then x · (1 / sqrt(mean + eps)) and the weight multiply rounded as
// transformers rounds them; the add: float32 a + b, BF16 rounded once, as ATen's add), on
// either path, whatever the number of rows or threads: a row's result depends on that row only.
#pragma once

#include <ATen/ATen.h>

namespace placer::model {

// Whether the AVX-512 path runs on this CPU (AVX-512 F, BW and VL).
bool RowKernelsVectorRuns();

// Whether RmsNormRows takes these operands: x [..., width] float32 or BF16 on the CPU, strided,
// weight [width] contiguous of the same dtype.
bool RmsNormRowsApplies(const at::Tensor& x, const at::Tensor& weight);

// RMSNorm of every row of x (see the promise above). Requires RmsNormRowsApplies; `vector`
// (only where RowKernelsVectorRuns) picks the AVX-512 path, else the scalar one.
at::Tensor RmsNormRows(const at::Tensor& x, const at::Tensor& weight, double eps,
                       bool vector = RowKernelsVectorRuns());

// a + b: for contiguous float32 or BF16 CPU tensors of one shape and dtype the rows above,
// else at::add. Either way ATen's result, bit for bit.
at::Tensor AddRows(const at::Tensor& a, const at::Tensor& b, bool vector = RowKernelsVectorRuns());

}  // namespace placer::model
