// The packed kernels' runs (packed_kernel_runs.h).
#include "model/packed_kernel_runs.h"

#include "loader/quantized_weight.h"
#include "model/digit_tiles.h"
#include "model/int8_activation_tiles.h"
#include "model/packed_bf16_kernels.h"
#include "model/packed_product.h"
#include "model/quantized_int4_bf16.h"
#include "model/quantized_int4_digit_chunks.h"
#include "model/quantized_int4_digits.h"
#include "model/quantized_int4_quads.h"
#include "model/quantized_int8_digits.h"
#include "model/quantized_tiles.h"
#include "model/quantized_int8_bf16.h"
#include "model/quantized_kernels.h"
#include "base/cache_line_vector.h"

namespace placer::model {
namespace {

// One kernel's products of x by every weight of `weights` (all sharing their inputs,
// PackedWeightsShareInputs; one weight is the common case), through RunPackedProducts.
std::vector<at::Tensor> GeneralProducts(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                        const std::vector<at::Tensor>& biases, QuantIsa isa) {
  const bool quads = isa == QuantIsa::kAvx512 && Int4QuadsApply(*loader::PackedLayoutOf(weights[0]));
  // A plain reference to this thread's buffer: the helpers running the lambda below must read
  // the caller's (a thread_local named inside it would be each helper's own).
  base::CacheLineVector<float>& buffer = ArrangedInputs();
  const float* arranged = nullptr;
  return RunPackedProducts(
      x, weights, biases,
      [&](const QuantOperands& op) {
        if (quads) arranged = ArrangeInt4QuadInputs(op, &buffer);
      },
      [&](const QuantOperands& op, int64_t n0, int64_t n1) {
        if (quads) {
          QuantizedRowsInt4Quads(op, arranged, n0, n1);
        } else if (isa == QuantIsa::kAvx512) {
          QuantizedRowsAvx512(op, n0, n1);
        } else {
          QuantizedRowsAvx2(op, n0, n1);
        }
      });
}

std::vector<at::Tensor> Int8ActivationProducts(const at::Tensor& x,
                                               const std::vector<at::Tensor>& weights,
                                               const std::vector<at::Tensor>& biases,
                                               Int8ActivationIsa isa) {
  const loader::PackedLayout layout = *loader::PackedLayoutOf(weights[0]);
  Int8Activations codes;
  return RunPackedProducts(
      x, weights, biases,
      [&](const QuantOperands& op) {
        QuantizeActivations(op, ActivationBlock(layout), &codes, isa);
      },
      [&](const QuantOperands& op, int64_t n0, int64_t n1) {
        QuantizedRowsInt8Activations(op, codes, n0, n1, isa);
      });
}

std::vector<at::Tensor> Int8ActivationTileProducts(const at::Tensor& x,
                                                   const std::vector<at::Tensor>& weights,
                                                   const std::vector<at::Tensor>& biases) {
  // A plain reference to the caller's buffer (the helpers must read it, not their own).
  Int8ActivationTileInputs& inputs = Int8ActivationTileInputsBuffer();
  return RunPackedProducts(
      x, weights, biases, [&](const QuantOperands& op) { ArrangeInt8ActivationTileInputs(op, &inputs); },
      [&](const QuantOperands& op, int64_t n0, int64_t n1) {
        QuantizedChunkRowsInt8ActivationTiles(op, inputs, n0, n1);
      });
}

// The vdpbf16ps kernels over packed codes (packed_bf16_kernels.h): inputs arranged into the
// kernel's pairs once per call, then the outputs on the helpers.
std::vector<at::Tensor> Bf16KernelProducts(
    const at::Tensor& x, const std::vector<at::Tensor>& weights, const std::vector<at::Tensor>& biases,
    void (*arrange)(const QuantOperands&, base::CacheLineVector<uint32_t>*),
    void (*rows)(const QuantOperands&, const uint32_t*, int64_t, int64_t)) {
  // This thread's buffer, kept for its next call (trimmed after a long prompt), as
  // ArrangedInputs is: a fresh one per product was an allocation per projection.
  thread_local base::CacheLineVector<uint32_t> kept_pairs;
  constexpr size_t kKeptPairs = size_t{1} << 20;
  if (kept_pairs.capacity() > kKeptPairs) base::CacheLineVector<uint32_t>().swap(kept_pairs);
  base::CacheLineVector<uint32_t>& pairs = kept_pairs;  // the helpers read the caller's
  return RunPackedProducts(
      x, weights, biases, [&](const QuantOperands& op) { arrange(op, &pairs); },
      [&](const QuantOperands& op, int64_t n0, int64_t n1) { rows(op, pairs.data(), n0, n1); });
}

// The calling thread's digits, kept for its next call (a decode step's ~40 products each made
// two fresh heap blocks) unless a long input made them large.
template <class Digits>
Digits& KeptDigits() {
  thread_local Digits kept;
  constexpr size_t kKeptDigitBytes = size_t{1} << 20;
  if (kept.digits.capacity() > kKeptDigitBytes) kept = Digits();
  return kept;
}

std::vector<at::Tensor> Int4DigitsProducts(const at::Tensor& x,
                                           const std::vector<at::Tensor>& weights,
                                           const std::vector<at::Tensor>& biases,
                                           Int4DigitsIsa isa) {
  Int4Digits& digits = KeptDigits<Int4Digits>();  // the helpers read the caller's
  return RunPackedProducts(
      x, weights, biases, [&](const QuantOperands& op) { DigitsOfRows(op, &digits); },
      [&](const QuantOperands& op, int64_t n0, int64_t n1) {
        QuantizedRowsInt4Digits(op, digits, n0, n1, isa);
      });
}

std::vector<at::Tensor> Int8DigitsProducts(const at::Tensor& x,
                                           const std::vector<at::Tensor>& weights,
                                           const std::vector<at::Tensor>& biases) {
  Int8Digits& digits = KeptDigits<Int8Digits>();  // the helpers read the caller's
  return RunPackedProducts(
      x, weights, biases, [&](const QuantOperands& op) { Int8DigitsOfRows(op, &digits); },
      [&](const QuantOperands& op, int64_t n0, int64_t n1) {
        QuantizedRowsInt8Digits(op, digits, n0, n1);
      });
}

std::vector<at::Tensor> QuantizedTileProducts(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                         const std::vector<at::Tensor>& biases) {
  // A plain reference to the caller's buffer (the helpers must read it, not their own).
  QuantizedTileInputs& inputs = QuantizedTileInputsBuffer();
  return RunPackedProducts(
      x, weights, biases,
      [&](const QuantOperands& op) {
        ArrangeQuantizedTileInputs(op, x.scalar_type() == at::kBFloat16, &inputs);
      },
      [&](const QuantOperands& op, int64_t n0, int64_t n1) {
        QuantizedChunkRowsTiles(op, inputs, n0, n1);
      });
}

std::vector<at::Tensor> DigitTileProducts(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                          const std::vector<at::Tensor>& biases) {
  // A plain reference to the caller's buffer (the helpers must read it, not their own).
  DigitTileInputs& inputs = DigitTileInputsBuffer();
  return RunPackedProducts(
      x, weights, biases, [&](const QuantOperands& op) { ArrangeDigitTileInputs(op, &inputs); },
      [&](const QuantOperands& op, int64_t n0, int64_t n1) {
        QuantizedChunkRowsDigitTiles(op, inputs, n0, n1);
      },
      kDigitTileOutputsPerTask);
}

std::vector<at::Tensor> Int4DigitChunkProducts(const at::Tensor& x,
                                               const std::vector<at::Tensor>& weights,
                                               const std::vector<at::Tensor>& biases) {
  // A plain reference to the caller's buffer (the helpers must read it, not their own).
  Int4DigitChunkInputs& inputs = DigitChunkInputsBuffer();
  return RunPackedProducts(
      x, weights, biases, [&](const QuantOperands& op) { ArrangeDigitChunkInputs(op, &inputs); },
      [&](const QuantOperands& op, int64_t n0, int64_t n1) {
        QuantizedChunkRowsInt4Digits(op, inputs, n0, n1);
      });
}

}  // namespace

std::vector<at::Tensor> RunPackedKernel(PackedKernel kernel, const at::Tensor& x,
                                        const std::vector<at::Tensor>& weights,
                                        const std::vector<at::Tensor>& biases) {
  switch (kernel) {
    case PackedKernel::kInt8Activations:
      return Int8ActivationProducts(x, weights, biases, DetectInt8ActivationIsa());
    case PackedKernel::kInt8ActivationTiles: return Int8ActivationTileProducts(x, weights, biases);
    case PackedKernel::kInt4Bf16:
      return Bf16KernelProducts(x, weights, biases, ArrangeInt4Bf16Inputs, QuantizedRowsInt4Bf16);
    case PackedKernel::kInt8Bf16:
      return Bf16KernelProducts(x, weights, biases, ArrangeInt8Bf16Inputs, QuantizedRowsInt8Bf16);
    case PackedKernel::kInt4Digits:
      return Int4DigitsProducts(x, weights, biases, DetectInt4DigitsIsa());
    case PackedKernel::kInt8Digits: return Int8DigitsProducts(x, weights, biases);
    case PackedKernel::kDigitTiles: return DigitTileProducts(x, weights, biases);
    case PackedKernel::kQuantizedTiles: return QuantizedTileProducts(x, weights, biases);
    case PackedKernel::kInt4DigitChunks: return Int4DigitChunkProducts(x, weights, biases);
    case PackedKernel::kGeneral: return GeneralProducts(x, weights, biases, DetectQuantIsa());
    case PackedKernel::kNone: break;
  }
  TORCH_CHECK(false, "RunPackedKernel: no kernel chosen");
}


std::vector<at::Tensor> RunGeneralKernel(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                         const std::vector<at::Tensor>& biases, QuantIsa isa) {
  return GeneralProducts(x, weights, biases, isa);
}

std::vector<at::Tensor> RunInt8ActivationKernel(const at::Tensor& x,
                                                const std::vector<at::Tensor>& weights,
                                                const std::vector<at::Tensor>& biases,
                                                Int8ActivationIsa isa) {
  return Int8ActivationProducts(x, weights, biases, isa);
}

std::vector<at::Tensor> RunInt4DigitsKernel(const at::Tensor& x,
                                            const std::vector<at::Tensor>& weights,
                                            const std::vector<at::Tensor>& biases,
                                            Int4DigitsIsa isa) {
  return Int4DigitsProducts(x, weights, biases, isa);
}

}  // namespace placer::model
