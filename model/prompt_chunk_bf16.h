// x @ weight^T over BF16 [out, in] weights for prompt chunks (more rows than a decode step's),
// with AVX512-BF16, on the kernels' own threads.
//
// ATen's BF16 GEMM (oneDNN) runs on its OpenMP pool, which placerd keeps passive (idle threads
// sleep: thread_wait_defaults.cc says why). A oneDNN product wakes that pool several times per
// call, and on a 2-vCPU VM a 64-row product of the small preset took 1.2-1.4 ms instead of the
// 0.6-0.7 it takes with spinning threads (ONEDNN_VERBOSE, bench/analysis.md "BF16 prompt
// chunks"). This kernel runs on SpinningWorkers, as the decode kernels do, and needs no pool.
//
// The chunk's rows are rearranged, not the weight: each block of 64 rows is stored as pairs of
// consecutive inputs, [in/2][64 rows][2], so that one vdpbf16ps multiplies one broadcast pair of
// a weight row by a pair of 16 rows. A register tile of T weight rows x 64 rows takes T
// broadcasts and 4 input vectors per 4T vdpbf16ps (64 multiply-adds each).
//
// Each output is one chain of vdpbf16ps over the input pairs in order (each BF16 product exact
// in float32, as every BF16 kernel here), then + bias in float32 and one rounding to BF16 (to
// nearest even, as ATen converts). It depends only on its input row and weight row: a row's
// result is the same in any call of this kernel, alone or batched, with any thread count. It is
// not the few-row kernels' (small_batch_bf16.h) bit for bit: a row keeps one path as long as its
// batch stays on one side of SmallBatchBf16MaxRows, as with the float32 prompt-chunk kernel.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "model/prompt_chunk_prefetch.h"

namespace placer::model {

// True when this CPU runs the kernel (AVX512-BF16 with AVX512BW), whether or not Linear uses it.
bool PromptChunkBf16Runs();

// True when Linear should use the kernel for `rows` input rows: where it runs, ATen's BF16 GEMM
// has no AMX tiles (BfloatGemmHasAmx: there oneDNN keeps the chunks) and the few-row kernels
// stop (rows > SmallBatchBf16MaxRows), up to the chunk size where it stops paying.
bool PromptChunkBf16Takes(int64_t rows);

// x @ weight^T + bias in BF16. Requires PromptChunkBf16Runs() and SmallBatchBf16Applies(x,
// weight, bias); any number of rows.
at::Tensor PromptChunkLinearBf16(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// x times each weight (+ its bias, or none where undefined) in one call: x rearranged once and
// every weight's rows in one parallel loop. Each result is bit for bit PromptChunkLinearBf16(x,
// weights[i], biases[i]). Requires what PromptChunkLinearBf16 does of every pair.
std::vector<at::Tensor> PromptChunkLinearsBf16(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                               const std::vector<at::Tensor>& biases);

// Writes weight rows [first, first + count) as dense BF16 bits to out ([count, in], contiguous).
using DenseBf16WeightRows = std::function<void(int64_t first, int64_t count, uint16_t* out)>;

// The same product for a weight that is not dense BF16 (a packed quantized weight): each task
// asks `dense_rows` for its rows (48 at most) into a buffer its thread keeps, so the dense weight
// never exists whole. Bit for bit PromptChunkLinearBf16(x, dense, bias) when `dense_rows` writes
// the rows of `dense` ([out, x.size(-1)]). Called on the workers' threads, concurrently. x is
// BF16; bias undefined, BF16 or float32 [out].
at::Tensor PromptChunkLinearBf16(const at::Tensor& x, int64_t out,
                                 const DenseBf16WeightRows& dense_rows, const at::Tensor& bias);

// Several such weights of one x in one call (a layer's packed q, k and v): x rearranged once,
// every weight's tasks in one parallel loop. Result i is bit for bit PromptChunkLinearBf16(x,
// outs[i], dense_rows[i], biases[i]).
// `source_bytes`, where given (one per weight), says where each source reads its rows (as
// PromptChunkLinears): the next task's bytes are fetched while this task's rows are multiplied.
std::vector<at::Tensor> PromptChunkLinearsBf16(const at::Tensor& x, const std::vector<int64_t>& outs,
                                               const std::vector<DenseBf16WeightRows>& dense_rows,
                                               const std::vector<at::Tensor>& biases,
                                               const std::vector<RowSourceBytes>& source_bytes = {});

}  // namespace placer::model
