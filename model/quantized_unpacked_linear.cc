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
// packed host weight unpacked (AVX-512, or AVX2 where that is all the CPU has) into `out`,
// float32 or BF16 bits.
template <typename Out>
std::function<void(int64_t, int64_t, Out*)> UnpackTaskRows(const at::Tensor& weight) {
  const loader::PackedLayout layout = *loader::PackedLayoutOf(weight);
  const UnpackOperands op{static_cast<const uint8_t*>(weight.data_ptr()), layout.bits, layout.in,
                          layout.group_size, layout.groups(), layout.block_bytes()};
  const int64_t row_bytes = layout.groups() * layout.block_bytes();
  const bool avx512 = DetectQuantIsa() == QuantIsa::kAvx512;
  return [op, row_bytes, avx512](int64_t first, int64_t count, Out* out) {
    UnpackOperands rows = op;
    rows.w += first * row_bytes;
    avx512 ? UnpackRowsAvx512(rows, 0, count, out) : UnpackRowsAvx2(rows, 0, count, out);
  };
}

// Where UnpackTaskRowsAvx512 reads each weight's rows: the kernels fetch the next task's
// packed bytes while they multiply this task's rows.
std::vector<RowSourceBytes> SourceBytesOf(const std::vector<at::Tensor>& weights) {
  std::vector<RowSourceBytes> bytes;
  for (const at::Tensor& weight : weights) {
    const loader::PackedLayout layout = *loader::PackedLayoutOf(weight);
    bytes.push_back(RowSourceBytes{static_cast<const uint8_t*>(weight.data_ptr()),
                                   layout.groups() * layout.block_bytes()});
  }
  return bytes;
}

}  // namespace

at::Tensor QuantizedPromptChunkBf16(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  TORCH_CHECK(QuantizedLinearApplies(x, weight, bias) && x.scalar_type() == at::kBFloat16 &&
                  PromptChunkBf16Runs() && DetectQuantIsa() == QuantIsa::kAvx512,
              "QuantizedPromptChunkBf16: BF16 rows, a packed host weight, an AVX512-BF16 CPU");
  return PromptChunkLinearsBf16(x, {loader::PackedLayoutOf(weight)->out},
                                {UnpackTaskRows<uint16_t>(weight)}, {bias}, SourceBytesOf({weight}))[0];
}

namespace {

enum class ChunkKernel { kNone, kFloat, kBf16 };

// The prompt-chunk kernel that takes x over every one of these packed host weights, each
// task's rows unpacked where it uses them, or kNone.
ChunkKernel ChunkKernelFor(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                           const std::vector<at::Tensor>& biases) {
  const QuantIsa isa = DetectQuantIsa();
  if (isa == QuantIsa::kNone || weights.empty()) return ChunkKernel::kNone;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!weights[i].device().is_cpu() || !QuantizedLinearApplies(x, weights[i], biases[i])) {
      return ChunkKernel::kNone;
    }
  }
  const int64_t rows = x.numel() / x.size(-1);
  // AVX2 alone: float32 chunks, and BF16 ones widened to float32 (prompt_chunk_avx2.h).
  if ((x.scalar_type() == at::kFloat || isa == QuantIsa::kAvx2) && PromptChunkLinearTakes(rows)) {
    return ChunkKernel::kFloat;
  }
  if (isa != QuantIsa::kAvx512) return ChunkKernel::kNone;
  if (x.scalar_type() == at::kBFloat16 && PromptChunkBf16Takes(rows)) return ChunkKernel::kBf16;
  return ChunkKernel::kNone;
}

at::Tensor UnpackedWholeOrOnDevice(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (!weight.device().is_cpu()) {
    // No packed kernels on GPUs yet: this weight dequantized there for this product.
    const at::Tensor dense = loader::DequantizeLinearWeightOnDevice(weight, x.scalar_type());
    return bias.defined() ? at::linear(x, dense, bias.to(x.scalar_type())) : at::linear(x, dense);
  }
  // One weight at a time in a buffer the thread keeps (sized by the largest weight it has
  // seen): a prompt chunk never holds a dequantized layer, let alone the model.
  thread_local at::Tensor scratch;
  const at::ScalarType type = x.scalar_type() == at::kBFloat16 ? at::kBFloat16 : at::kFloat;
  UnpackQuantizedWeight(weight, type, DetectQuantIsa(), scratch);
  const at::Tensor dense = type == x.scalar_type() ? scratch : scratch.to(x.scalar_type());
  // The unquantized model's own product for these rows (SmallBatchLinear up to 256 F32 rows
  // when the BLAS lacks AVX-512 sgemm, else BLAS / oneDNN).
  return Linear(x, dense, bias.defined() ? bias.to(x.scalar_type()) : at::Tensor());
}

}  // namespace

at::Tensor UnpackedQuantizedLinear(const at::Tensor& x, const at::Tensor& weight,
                                   const at::Tensor& bias) {
  return UnpackedQuantizedLinears(x, {weight}, {bias})[0];
}

std::vector<at::Tensor> UnpackedQuantizedLinears(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                                 const std::vector<at::Tensor>& biases) {
  TORCH_CHECK(weights.size() == biases.size(), "UnpackedQuantizedLinears: one bias (or none) per weight");
  const ChunkKernel chunk = ChunkKernelFor(x, weights, biases);
  std::vector<int64_t> outs;
  for (const at::Tensor& weight : weights) {
    outs.push_back(chunk != ChunkKernel::kNone ? loader::PackedLayoutOf(weight)->out : 0);
  }
  if (chunk == ChunkKernel::kFloat) {
    // The F32 prompt-chunk kernel unpacks each task's rows where it uses them: the same dense
    // rows and products as unpacking the whole weight for Linear, without writing it out.
    std::vector<DenseWeightRows> rows;
    std::vector<at::Tensor> float_biases;
    for (size_t i = 0; i < weights.size(); ++i) {
      rows.push_back(UnpackTaskRows<float>(weights[i]));
      float_biases.push_back(biases[i].defined() ? biases[i].to(at::kFloat) : at::Tensor());
    }
    if (x.scalar_type() == at::kFloat) {
      return PromptChunkLinears(x, outs, rows, float_biases, SourceBytesOf(weights));
    }
    // BF16 rows on AVX2 alone: the products of the float32 weight the decode kernels use (not
    // of its BF16 rounding), rounded once to BF16.
    std::vector<at::Tensor> ys =
        PromptChunkLinears(x.to(at::kFloat), outs, rows, float_biases, SourceBytesOf(weights));
    for (at::Tensor& y : ys) y = y.to(x.scalar_type());
    return ys;
  }
  if (chunk == ChunkKernel::kBf16) {
    std::vector<DenseBf16WeightRows> rows;
    for (const at::Tensor& weight : weights) rows.push_back(UnpackTaskRows<uint16_t>(weight));
    return PromptChunkLinearsBf16(x, outs, rows, biases, SourceBytesOf(weights));
  }
  std::vector<at::Tensor> ys;
  for (size_t i = 0; i < weights.size(); ++i) ys.push_back(UnpackedWholeOrOnDevice(x, weights[i], biases[i]));
  return ys;
}

}  // namespace placer::model
