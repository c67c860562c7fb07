// Each packed kernel's own entry (quantized_linear.h): whether serving's choice would take it
// for these operands, and one call of it alone, for the tests and bench that compare kernels.
// Serving itself goes through QuantizedLinear(s) (quantized_linear.cc).
#include <algorithm>
#include <vector>

#include "loader/quantized_weight.h"
#include "model/digit_tiles.h"
#include "model/packed_bf16_kernels.h"
#include "model/packed_kernel_runs.h"
#include "model/quantized_int4_bf16.h"
#include "model/quantized_int4_digits.h"
#include "model/quantized_int8_bf16.h"
#include "model/quantized_int8_digits.h"
#include "model/quantized_linear.h"
#include "model/quantized_tiles.h"

namespace placer::model {

namespace {

// The vdpbf16ps kernels over packed codes (packed_bf16_kernels.h): BF16 rows, a packed host
// weight whose layout `applies` takes, a CPU that runs them.
bool UsesPackedBf16Kernel(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                          bool (*applies)(const loader::PackedLayout&)) {
  return PackedBf16KernelsRun() && x.scalar_type() == at::kBFloat16 &&
         QuantizedLinearApplies(x, weight, bias) && applies(*loader::PackedLayoutOf(weight));
}

}  // namespace

bool UsesInt4Bf16Kernel(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return UsesPackedBf16Kernel(x, weight, bias, Int4Bf16KernelApplies);
}

at::Tensor QuantizedLinearInt4Bf16(const at::Tensor& x, const at::Tensor& weight,
                                   const at::Tensor& bias) {
  TORCH_CHECK(UsesInt4Bf16Kernel(x, weight, bias),
              "QuantizedLinearInt4Bf16: BF16 rows, a packed 4-bit host weight, an AVX512-BF16 CPU");
  return RunPackedKernel(PackedKernel::kInt4Bf16, x, {weight}, {bias})[0];
}

bool UsesInt8Bf16Kernel(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return UsesPackedBf16Kernel(x, weight, bias, Int8Bf16KernelApplies);
}

at::Tensor QuantizedLinearInt8Bf16(const at::Tensor& x, const at::Tensor& weight,
                                   const at::Tensor& bias) {
  TORCH_CHECK(UsesInt8Bf16Kernel(x, weight, bias),
              "QuantizedLinearInt8Bf16: BF16 rows, a packed 8-bit host weight in groups of 64s, an "
              "AVX512-BF16 CPU");
  return RunPackedKernel(PackedKernel::kInt8Bf16, x, {weight}, {bias})[0];
}

at::Tensor QuantizedLinearInt4Digits(const at::Tensor& x, const at::Tensor& weight,
                                     const at::Tensor& bias, Int4DigitsIsa isa) {
  const std::vector<Int4DigitsIsa> runnable = RunnableInt4DigitsIsas();
  TORCH_CHECK(std::find(runnable.begin(), runnable.end(), isa) != runnable.end(),
              "QuantizedLinearInt4Digits: this CPU does not run ", Int4DigitsIsaName(isa));
  TORCH_CHECK(QuantizedLinearApplies(x, weight, bias) &&
                  Int4DigitsKernelApplies(*loader::PackedLayoutOf(weight)),
              "QuantizedLinearInt4Digits: float32 or BF16 rows, a packed 4-bit host weight in "
              "groups of a multiple of 128");
  return RunInt4DigitsKernel(x, {weight}, {bias}, isa)[0];
}

bool UsesInt8DigitsKernel(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return Int8DigitsKernelRuns() && QuantizedLinearApplies(x, weight, bias) &&
         Int8DigitsKernelApplies(*loader::PackedLayoutOf(weight));
}

at::Tensor QuantizedLinearInt8Digits(const at::Tensor& x, const at::Tensor& weight,
                                     const at::Tensor& bias) {
  TORCH_CHECK(UsesInt8DigitsKernel(x, weight, bias),
              "QuantizedLinearInt8Digits: float32 or BF16 rows, a packed 8-bit host weight in "
              "groups of a multiple of 128, an AVX512-VNNI CPU");
  return RunPackedKernel(PackedKernel::kInt8Digits, x, {weight}, {bias})[0];
}

bool UsesInt4DigitChunksKernel(const at::Tensor& x, const at::Tensor& weight,
                               const at::Tensor& bias) {
  return DigitsVnniRuns() && x.scalar_type() == at::kFloat &&
         QuantizedLinearApplies(x, weight, bias) &&
         Int4DigitsKernelApplies(*loader::PackedLayoutOf(weight));
}

at::Tensor QuantizedLinearInt4DigitChunks(const at::Tensor& x, const at::Tensor& weight,
                                          const at::Tensor& bias) {
  TORCH_CHECK(UsesInt4DigitChunksKernel(x, weight, bias),
              "QuantizedLinearInt4DigitChunks: float32 rows, a packed 4-bit host weight in groups "
              "of a multiple of 128, an AVX512-VNNI CPU");
  return RunPackedKernel(PackedKernel::kInt4DigitChunks, x, {weight}, {bias})[0];
}

bool UsesDigitTilesKernel(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return DigitTilesRun() && QuantizedLinearApplies(x, weight, bias) &&
         x.scalar_type() == at::kFloat && DigitTilesApply(*loader::PackedLayoutOf(weight));
}

at::Tensor QuantizedLinearDigitTiles(const at::Tensor& x, const at::Tensor& weight,
                                     const at::Tensor& bias) {
  TORCH_CHECK(UsesDigitTilesKernel(x, weight, bias),
              "QuantizedLinearDigitTiles: float32 rows, a packed 4-bit or 8-bit host weight in "
              "groups of 128s, a CPU with AMX-INT8");
  return RunPackedKernel(PackedKernel::kDigitTiles, x, {weight}, {bias})[0];
}

bool UsesQuantizedTilesKernel(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return QuantizedTilesKernelRuns() && QuantizedLinearApplies(x, weight, bias) &&
         QuantizedTilesKernelApplies(*loader::PackedLayoutOf(weight));
}

at::Tensor QuantizedLinearTiles(const at::Tensor& x, const at::Tensor& weight,
                                const at::Tensor& bias) {
  TORCH_CHECK(UsesQuantizedTilesKernel(x, weight, bias),
              "QuantizedLinearTiles: float32 or BF16 rows, a packed 4-bit or 8-bit host weight in "
              "groups of 32s, a CPU with AMX tiles");
  return RunPackedKernel(PackedKernel::kQuantizedTiles, x, {weight}, {bias})[0];
}

}  // namespace placer::model
