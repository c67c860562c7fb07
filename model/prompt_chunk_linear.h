// x @ weight^T over float32 [out, in] weights for prompt chunks: many rows at once, without
// copying the weight.
//
// sgemm packs (copies) the whole weight on every call: for a 64-row chunk that copy costs
// about as much as the multiplication (bench/analysis.md). The few-row kernels
// (small_batch_linear.h) read the weight in place but take dot products, whose lane sums and
// input loads keep them near half the FMA peak. Here the chunk's rows, not the weight, are
// rearranged: transposed into [in][64] blocks (a few microseconds), so a register tile of 6
// weight rows x 64 input rows needs one broadcast weight value and 4 input vectors per 24
// multiply-adds, and every output is one chain of multiply-adds over `in` in order.
//
// Batch invariance: an output depends only on its input row and weight row (its chain does not
// see the other rows of the call, their count or its position), so a row gets the same result
// in any call of this kernel, alone or batched, with any thread count. It is not bit for bit
// the few-row kernels' result: a row keeps one path as long as its batch stays on one side of
// SmallBatchLinearMaxRows.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "model/prompt_chunk_prefetch.h"
#include "model/small_batch_linear.h"

namespace placer::model {

// True when this CPU runs the kernel (AVX-512F, or AVX2 and FMA: prompt_chunk_avx2.h).
bool PromptChunkLinearRuns();

// True when Linear should use the kernel for `rows` input rows: with AVX-512 for 33-128 rows,
// ahead of the few-row kernels (which keep 1-32 rows, and 129-256 where the BLAS has no AVX-512
// sgemm: SmallBatchLinearMaxRows) and of sgemm; with AVX2 alone past the few-row kernels' rows
// (16) up to 192.
bool PromptChunkLinearTakes(int64_t rows);

// x @ weight^T + bias. Requires PromptChunkLinearRuns() and SmallBatchLinearApplies(x, weight,
// bias) (weight [out, in]); any number of rows. Threads: SpinningWorkers, as SmallBatchLinear.
at::Tensor PromptChunkLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// x times each weight (+ its bias, or none where undefined) in one call: x rearranged once and
// every weight's rows in one parallel loop, so a layer's q, k and v (gate and up) wait for each
// other once. Each result is bit for bit PromptChunkLinear(x, weights[i], biases[i]). Requires
// what PromptChunkLinear does of every pair.
std::vector<at::Tensor> PromptChunkLinears(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                           const std::vector<at::Tensor>& biases);

// Writes weight rows [first, first + count) as dense float32 to out ([count, in], contiguous).
using DenseWeightRows = std::function<void(int64_t first, int64_t count, float* out)>;


// The same product for a weight that is not dense float32 (a packed quantized weight): each
// task asks `dense_rows` for its rows (48 at most) into a buffer its thread keeps, so the dense
// weight never exists whole and each task's rows stay in its core's cache from being written
// to being used. Bit for bit PromptChunkLinear(x, dense, bias) when `dense_rows` writes the
// rows of `dense` ([out, x.size(-1)]). Called on the workers' threads, concurrently.
at::Tensor PromptChunkLinear(const at::Tensor& x, int64_t out, const DenseWeightRows& dense_rows,
                             const at::Tensor& bias);

// Several such weights of one x in one call (a layer's packed q, k and v): x rearranged once,
// every weight's tasks in one parallel loop. Result i is bit for bit PromptChunkLinear(x,
// outs[i], dense_rows[i], biases[i]).
// `source_bytes`, where given (one per weight), says where each source reads its rows (row r
// from the row_bytes bytes at bytes + r * row_bytes): the kernel then fetches the next task's
// bytes from memory while it multiplies this task's rows.
std::vector<at::Tensor> PromptChunkLinears(const at::Tensor& x, const std::vector<int64_t>& outs,
                                           const std::vector<DenseWeightRows>& dense_rows,
                                           const std::vector<at::Tensor>& biases,
                                           const std::vector<RowSourceBytes>& source_bytes = {});

}  // namespace placer::model
