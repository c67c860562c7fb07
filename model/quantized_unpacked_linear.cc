// Packed weights where no packed kernel takes the rows: unpacked (whole, or a task's rows at a
// time) for a dense product (quantized_unpacked_linear.h).
#include "model/quantized_unpacked_linear.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <functional>

#include "loader/quantized_weight.h"
#include "model/packed_product.h"
#include "model/prompt_chunk_bf16.h"
#include "model/prompt_chunk_linear.h"
#include "model/quantized_linear.h"
#include "model/quantized_unpack.h"
#include "model/spinning_workers.h"
#include "model/tensor_ops.h"

namespace placer::model {
namespace {

bool Runs(QuantIsa isa) {
  const std::vector<QuantIsa> runnable = RunnableQuantIsas();
  return isa == QuantIsa::kNone || std::find(runnable.begin(), runnable.end(), isa) != runnable.end();
}

}  // namespace

void UnpackQuantizedWeight(const at::Tensor& weight, at::ScalarType dtype, QuantIsa isa,
                           at::Tensor& scratch) {
  const std::optional<loader::PackedLayout> found = loader::PackedLayoutOf(weight);
  TORCH_CHECK(found.has_value() && weight.device().is_cpu() &&
                  (dtype == at::kFloat || dtype == at::kBFloat16) && Runs(isa),
              "UnpackQuantizedWeight: a packed weight in host memory, float32 or BF16, an ISA this CPU runs");
  const loader::PackedLayout& layout = *found;
  if (!scratch.defined() || scratch.scalar_type() != dtype) {
    scratch = at::empty({layout.out, layout.in}, at::TensorOptions().dtype(dtype));
  } else {
    scratch.resize_({layout.out, layout.in});
  }
  const UnpackOperands op{static_cast<const uint8_t*>(weight.data_ptr()), layout.bits, layout.in,
                          layout.group_size, layout.groups(), layout.block_bytes()};
  // A plain reference: inside the lambda, running on the helpers, a thread_local name would
  // mean each helper's own buffer.
  at::Tensor& dense = scratch;
  const bool bf16 = dtype == at::kBFloat16;
  const SpinningWorkers::RangeFn run = [&](int64_t begin, int64_t end) {
    const int64_t n0 = begin * kPackedOutputsPerTask, n1 = std::min(layout.out, end * kPackedOutputsPerTask);
    uint16_t* bf16_out = bf16 ? reinterpret_cast<uint16_t*>(dense.data_ptr()) : nullptr;
    float* float_out = bf16 ? nullptr : dense.data_ptr<float>();
    switch (isa) {
      case QuantIsa::kAvx512:
        bf16 ? UnpackRowsAvx512(op, n0, n1, bf16_out) : UnpackRowsAvx512(op, n0, n1, float_out);
        break;
      case QuantIsa::kAvx2:
        bf16 ? UnpackRowsAvx2(op, n0, n1, bf16_out) : UnpackRowsAvx2(op, n0, n1, float_out);
        break;
      case QuantIsa::kNone: loader::DequantizeLinearWeightRows(weight, dense, n0, n1); break;
    }
  };
  // On the kernels' helper threads: ATen's pool would compete with them for the cores.
  const int64_t tasks = (layout.out + kPackedOutputsPerTask - 1) / kPackedOutputsPerTask;
  if (!SpinningWorkers::Shared().TryRun(tasks, run)) at::parallel_for(0, tasks, 1, run);
}

namespace {

// What the prompt-chunk kernels call for a task's weight rows: rows [first, first + count) of a
// packed host weight unpacked (AVX-512) into `out`, float32 or BF16 bits.
template <typename Out>
std::function<void(int64_t, int64_t, Out*)> UnpackTaskRowsAvx512(const at::Tensor& weight) {
  const loader::PackedLayout layout = *loader::PackedLayoutOf(weight);
  const UnpackOperands op{static_cast<const uint8_t*>(weight.data_ptr()), layout.bits, layout.in,
                          layout.group_size, layout.groups(), layout.block_bytes()};
  const int64_t row_bytes = layout.groups() * layout.block_bytes();
  return [op, row_bytes](int64_t first, int64_t count, Out* out) {
    UnpackOperands rows = op;
    rows.w += first * row_bytes;
    UnpackRowsAvx512(rows, 0, count, out);
  };
}

}  // namespace

at::Tensor QuantizedPromptChunkBf16(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  TORCH_CHECK(QuantizedLinearApplies(x, weight, bias) && x.scalar_type() == at::kBFloat16 &&
                  PromptChunkBf16Runs() && DetectQuantIsa() == QuantIsa::kAvx512,
              "QuantizedPromptChunkBf16: BF16 rows, a packed host weight, an AVX512-BF16 CPU");
  return PromptChunkLinearBf16(x, loader::PackedLayoutOf(weight)->out,
                               UnpackTaskRowsAvx512<uint16_t>(weight), bias);
}

at::Tensor UnpackedQuantizedLinear(const at::Tensor& x, const at::Tensor& weight,
                                   const at::Tensor& bias) {
  const QuantIsa isa = DetectQuantIsa();
  const int64_t in = x.dim() >= 1 ? x.size(-1) : 0;
  const int64_t rows = in > 0 ? x.numel() / in : 0;
  if (!weight.device().is_cpu()) {
    // No packed kernels on GPUs yet: this weight dequantized there for this product.
    const at::Tensor dense = loader::DequantizeLinearWeightOnDevice(weight, x.scalar_type());
    return bias.defined() ? at::linear(x, dense, bias.to(x.scalar_type())) : at::linear(x, dense);
  }
  const loader::PackedLayout layout = *loader::PackedLayoutOf(weight);
  if (isa == QuantIsa::kAvx512 && x.scalar_type() == at::kFloat && PromptChunkLinearTakes(rows) &&
      QuantizedLinearApplies(x, weight, bias)) {
    // The F32 prompt-chunk kernel unpacks each task's rows where it uses them: the same dense
    // rows and products as unpacking the whole weight for Linear below, without writing it out.
    return PromptChunkLinear(x, layout.out, UnpackTaskRowsAvx512<float>(weight),
                             bias.defined() ? bias.to(at::kFloat) : at::Tensor());
  }
  if (isa == QuantIsa::kAvx512 && x.scalar_type() == at::kBFloat16 && PromptChunkBf16Takes(rows) &&
      QuantizedLinearApplies(x, weight, bias)) {
    return QuantizedPromptChunkBf16(x, weight, bias);
  }
  // One weight at a time in a buffer the thread keeps (sized by the largest weight it has
  // seen): a prompt chunk never holds a dequantized layer, let alone the model.
  thread_local at::Tensor scratch;
  const at::ScalarType type = x.scalar_type() == at::kBFloat16 ? at::kBFloat16 : at::kFloat;
  UnpackQuantizedWeight(weight, type, isa, scratch);
  const at::Tensor dense = type == x.scalar_type() ? scratch : scratch.to(x.scalar_type());
  // The unquantized model's own product for these rows (SmallBatchLinear up to 256 F32 rows
  // when the BLAS lacks AVX-512 sgemm, else BLAS / oneDNN).
  return Linear(x, dense, bias.defined() ? bias.to(x.scalar_type()) : at::Tensor());
}

}  // namespace placer::model
