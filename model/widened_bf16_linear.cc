#include "model/widened_bf16_linear.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "model/prompt_chunk_linear.h"
#include "model/small_batch_bf16.h"
#include "model/tensor_ops.h"

namespace placer::model {

bool WidenedBf16LinearTakes(int64_t rows) {
  return !AtenBf16GemmIsVectorized() && DetectBf16Isa() != Bf16Isa::kNone &&
         rows > SmallBatchBf16MaxRows(DetectBf16Isa());
}

at::Tensor WidenedBf16Linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             int64_t max_slice_elements) {
  TORCH_CHECK(SmallBatchBf16Applies(x, weight, bias), "WidenedBf16Linear: BF16 CPU operands");
  const int64_t out = weight.size(0), in = weight.size(1);
  const int64_t rows = x.numel() / in;
  const at::Tensor x32 = x.reshape({rows, in}).to(at::kFloat);
  const at::Tensor bias32 = bias.defined() ? bias.to(at::kFloat) : at::Tensor();
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = out;
  if (PromptChunkLinearTakes(rows)) {
    // Each task's weight rows widened into its thread's buffer where the kernel uses them.
    const uint16_t* bits = reinterpret_cast<const uint16_t*>(weight.data_ptr());
    const DenseWeightRows widen = [bits, in](int64_t first, int64_t count, float* to) {
      const uint16_t* from = bits + first * in;
      for (int64_t i = 0; i < count * in; ++i) {
        const uint32_t widened = static_cast<uint32_t>(from[i]) << 16;
        std::memcpy(to + i, &widened, sizeof(float));
      }
    };
    return PromptChunkLinear(x32, out, widen, bias32).to(at::kBFloat16).view(shape);
  }
  at::Tensor y = at::empty({rows, out}, x.options());
  const int64_t slice_rows = std::max<int64_t>(1, max_slice_elements / std::max<int64_t>(in, 1));
  // Sized by the largest slice this thread has widened: one buffer for every layer's weights.
  thread_local at::Tensor widened;
  for (int64_t n0 = 0; n0 < out; n0 += slice_rows) {
    const int64_t n = std::min(slice_rows, out - n0);
    if (widened.numel() < n * in) widened = at::empty({n * in}, at::kFloat);
    const at::Tensor w32 = widened.narrow(0, 0, n * in).view({n, in});
    w32.copy_(weight.narrow(0, n0, n));
    // Linear's float32 path: past its few-row kernels' rows, sgemm.
    const at::Tensor part =
        Linear(x32, w32, bias32.defined() ? bias32.narrow(0, n0, n) : at::Tensor());
    y.narrow(1, n0, n).copy_(part);
  }
  return y.view(shape);
}

}  // namespace placer::model
