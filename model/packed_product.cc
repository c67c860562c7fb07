#include "model/packed_product.h"

#include <ATen/Parallel.h>

#include <algorithm>

#include "loader/quantized_weight.h"
#include "model/spinning_workers.h"
#include "model/stream_prefetch.h"

namespace placer::model {
namespace {

// x[0] + ... + x[n-1] in 16 interleaved partial sums, then a fixed tree: the same float on every
// CPU and for a row alone or in a batch, with a dependency chain 16 times shorter than summing
// in order (prompt chunks sum every group of every row).
float SumInFixedOrder(const float* x, int64_t n) {
  float lanes[16] = {};
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    for (int lane = 0; lane < 16; ++lane) lanes[lane] += x[c + lane];
  }
  for (int lane = 0; c < n; ++c, ++lane) lanes[lane] += x[c];
  for (int width = 8; width >= 1; width /= 2) {
    for (int lane = 0; lane < width; ++lane) lanes[lane] += lanes[lane + width];
  }
  return lanes[0];
}

// A contiguous float32 tensor's values in place, or a BF16 one's widened into `buffer` by a
// plain loop (exact); anything else through ATen into `widened`. Decode steps call this for
// every linear of every layer, where ATen's conversion (a dispatch and a fresh tensor) costs
// more than the widening itself.
const float* FloatValues(const at::Tensor& t, std::vector<float>& buffer, at::Tensor& widened) {
  if (t.is_contiguous() && t.scalar_type() == at::kFloat) return t.data_ptr<float>();
  if (t.is_contiguous() && t.scalar_type() == at::kBFloat16) {
    const int64_t n = t.numel();
    buffer.resize(static_cast<size_t>(n));
    const c10::BFloat16* values = t.data_ptr<c10::BFloat16>();
    for (int64_t i = 0; i < n; ++i) buffer[static_cast<size_t>(i)] = static_cast<float>(values[i]);
    return buffer.data();
  }
  widened = t.to(at::kFloat).contiguous();
  return widened.data_ptr<float>();
}

}  // namespace

std::vector<float>& ArrangedInputs() {
  thread_local std::vector<float> arranged;
  constexpr size_t kKeptFloats = size_t{1} << 20;
  if (arranged.capacity() > kKeptFloats) std::vector<float>().swap(arranged);
  return arranged;
}

at::Tensor RunPackedProduct(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            const std::function<void(const QuantOperands&)>& prepare,
                            const std::function<void(const QuantOperands&, int64_t, int64_t)>& outputs) {
  const loader::PackedLayout layout = *loader::PackedLayoutOf(weight);
  const int64_t rows = x.numel() / layout.in;
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = layout.out;
  const bool float_rows = x.scalar_type() == at::kFloat;
  at::Tensor y = at::empty(shape, x.options().memory_format(at::MemoryFormat::Contiguous));
  if (rows == 0) return y;
  // Reused per thread: a decode step's many products would otherwise allocate them each time.
  thread_local std::vector<float> x_buffer, bias_buffer, y_buffer, group_sums;
  at::Tensor x_widened, bias_widened;
  const float* xs = FloatValues(x, x_buffer, x_widened);
  const float* bias32 = bias.defined() ? FloatValues(bias, bias_buffer, bias_widened) : nullptr;
  if (!float_rows) y_buffer.resize(static_cast<size_t>(rows * layout.out));
  float* ys = float_rows ? y.data_ptr<float>() : y_buffer.data();
  const int64_t groups = layout.groups();
  group_sums.resize(static_cast<size_t>(rows * groups));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      group_sums[static_cast<size_t>(r * groups + g)] =
          SumInFixedOrder(xs + r * layout.in + g * layout.group_size, layout.group_size);
    }
  }
  const QuantOperands op{xs,
                         group_sums.data(),
                         static_cast<const uint8_t*>(weight.data_ptr()),
                         bias32,
                         ys,
                         rows,
                         layout.in,
                         layout.out,
                         layout.bits,
                         layout.group_size,
                         groups,
                         layout.block_bytes(),
                         StreamAheadRows(groups * layout.block_bytes())};
  prepare(op);
  const int64_t tasks = (layout.out + kPackedOutputsPerTask - 1) / kPackedOutputsPerTask;
  const SpinningWorkers::RangeFn run = [&](int64_t begin, int64_t end) {
    outputs(op, begin * kPackedOutputsPerTask, std::min(layout.out, end * kPackedOutputsPerTask));
  };
  if (!SpinningWorkers::Shared().TryRun(tasks, run)) at::parallel_for(0, tasks, 1, run);
  if (!float_rows) {
    c10::BFloat16* out = y.data_ptr<c10::BFloat16>();
    for (int64_t i = 0; i < rows * layout.out; ++i) out[i] = c10::BFloat16(ys[i]);
  }
  // A decode step's buffers stay for the next call; a long prompt's (or an all-positions
  // Forward's logits) are given back, not held by the thread for the process's lifetime.
  constexpr size_t kKeptFloats = size_t{1} << 20;  // 4 MiB each
  for (std::vector<float>* buffer : {&x_buffer, &bias_buffer, &y_buffer, &group_sums}) {
    if (buffer->capacity() > kKeptFloats) std::vector<float>().swap(*buffer);
  }
  return y;
}

}  // namespace placer::model
