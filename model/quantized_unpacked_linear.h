// Packed weights that no packed kernel takes: the rows QuantizedLinear gives past
// QuantizedLinearMaxRows (prompt chunks), GPU-resident weights, CPUs without AVX2. The weight
// is unpacked, whole into a buffer the thread keeps or a task's rows where they are used, and
// multiplied densely: a prompt chunk never holds a dequantized layer, let alone the model.
#pragma once

#include <ATen/ATen.h>

#include "model/quantized_linear.h"

namespace placer::model {

// The whole weight unpacked into `scratch` (resized; dtype float32 or BF16) by `isa`'s
// unpacking (quantized_unpack.h; kNone: the loader's scalar one) on the kernels' helper threads:
// bit for bit loader::DequantizeLinearWeight(weight, dtype) on every ISA.
void UnpackQuantizedWeight(const at::Tensor& weight, at::ScalarType dtype, QuantIsa isa,
                           at::Tensor& scratch);

// BF16 rows (a BF16 checkpoint under --quantize) by the BF16 prompt-chunk kernel
// (prompt_chunk_bf16.h), each task's weight rows unpacked (AVX-512) where it uses them: bit for
// bit PromptChunkLinearBf16 over the weight unpacked to BF16, without writing it out. Requires
// QuantizedLinearApplies, BF16 x, PromptChunkBf16Runs() and DetectQuantIsa() == kAvx512.
at::Tensor QuantizedPromptChunkBf16(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// What QuantizedLinear does where ChoosePackedKernel finds no kernel: on a GPU the weight
// dequantized there; F32 chunks by the prompt-chunk kernel and BF16 ones by
// QuantizedPromptChunkBf16 (AVX-512), each task's rows unpacked; else the whole weight unpacked
// into the thread's scratch and the unquantized model's Linear.
at::Tensor UnpackedQuantizedLinear(const at::Tensor& x, const at::Tensor& weight,
                                   const at::Tensor& bias);

// x times each weight (+ its bias, or none): result i is bit for bit UnpackedQuantizedLinear(x,
// weights[i], biases[i]). Where a prompt-chunk kernel takes every weight, one call of it (x
// rearranged once, one parallel loop: a layer's q, k and v wait for each other once).
std::vector<at::Tensor> UnpackedQuantizedLinears(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                                 const std::vector<at::Tensor>& biases);

}  // namespace placer::model
