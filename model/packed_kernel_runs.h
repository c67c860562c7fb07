// Inside QuantizedLinear (quantized_linear.cc, which chooses): each packed kernel run over one
// input and the weights sharing it, through RunPackedProducts (packed_product.h): the input
// prepared once in the kernel's own order (digits, int8 codes, pairs, tiles), then the outputs
// on the kernels' threads.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "model/quantized_int4_digits.h"
#include "model/quantized_linear.h"
#include "model/quantized_vnni.h"

namespace placer::model {

// The kernel QuantizedLinear gives these operands, in its order of preference; kNone where it
// takes another path (prompt chunks no chunk kernel takes: unpack + GEMM; GPU weights; no
// kernel for this CPU).
enum class PackedKernel {
  kNone, kInt8Activations, kInt8ActivationTiles, kInt4Bf16, kInt8Bf16, kInt4Digits, kInt8Digits, kDigitTiles, kQuantizedTiles,
  kInt4DigitChunks, kGeneral
};

// x times every weight of `weights` (one layout, PackedWeightsShareInputs) by `kernel` (not
// kNone; the CPU's best ISA where a kernel has several), one result per weight.
std::vector<at::Tensor> RunPackedKernel(PackedKernel kernel, const at::Tensor& x,
                                        const std::vector<at::Tensor>& weights,
                                        const std::vector<at::Tensor>& biases);

// The kernels with an ISA of the caller's choice (a runnable one; tests and bench compare).
std::vector<at::Tensor> RunGeneralKernel(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                         const std::vector<at::Tensor>& biases, QuantIsa isa);
std::vector<at::Tensor> RunInt8ActivationKernel(const at::Tensor& x,
                                                const std::vector<at::Tensor>& weights,
                                                const std::vector<at::Tensor>& biases,
                                                Int8ActivationIsa isa);
std::vector<at::Tensor> RunInt4DigitsKernel(const at::Tensor& x,
                                            const std::vector<at::Tensor>& weights,
                                            const std::vector<at::Tensor>& biases,
                                            Int4DigitsIsa isa);

}  // namespace placer::model
