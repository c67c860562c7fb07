#include "model/packed_product.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <optional>

#include "absl/container/inlined_vector.h"
#include "loader/quantized_weight.h"
#include "model/spinning_workers.h"
#include "model/stream_prefetch.h"
#include "base/cache_line_vector.h"

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
const float* FloatValues(const at::Tensor& t, base::CacheLineVector<float>& buffer,
                         at::Tensor& widened) {
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

base::CacheLineVector<float>& ArrangedInputs() {
  thread_local base::CacheLineVector<float> arranged;
  constexpr size_t kKeptFloats = size_t{1} << 20;
  if (arranged.capacity() > kKeptFloats) base::CacheLineVector<float>().swap(arranged);
  return arranged;
}

at::Tensor RunPackedProduct(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            const std::function<void(const QuantOperands&)>& prepare,
                            const std::function<void(const QuantOperands&, int64_t, int64_t)>& outputs) {
  return RunPackedProducts(x, {weight}, {bias}, prepare, outputs)[0];
}

bool PackedWeightsShareInputs(const std::vector<at::Tensor>& weights) {
  std::optional<loader::PackedLayout> first;
  for (const at::Tensor& weight : weights) {
    const std::optional<loader::PackedLayout> layout = loader::PackedLayoutOf(weight);
    if (!layout) return false;
    if (!first) first = layout;
    if (layout->in != first->in || layout->bits != first->bits ||
        layout->group_size != first->group_size) {
      return false;
    }
  }
  return first.has_value();
}

std::vector<at::Tensor> RunPackedProducts(
    const at::Tensor& x, const std::vector<at::Tensor>& weights, const std::vector<at::Tensor>& biases,
    const std::function<void(const QuantOperands&)>& prepare,
    const std::function<void(const QuantOperands&, int64_t, int64_t)>& outputs,
    int64_t outputs_per_task) {
  TORCH_CHECK(!weights.empty() && weights.size() == biases.size(),
              "RunPackedProducts: one bias (or none) per weight");
  // A decode step makes ~40 of these calls, each between two passes over weights that push the
  // heap out of the cache: the call's own bookkeeping lives on the stack (inlined up to
  // kInlineWeights weights), not in fresh heap blocks touched cold.
  constexpr size_t kInlineWeights = 4;
  const size_t count = weights.size();
  absl::InlinedVector<loader::PackedLayout, kInlineWeights> layouts;
  for (const at::Tensor& weight : weights) layouts.push_back(*loader::PackedLayoutOf(weight));
  const loader::PackedLayout& shared = layouts[0];
  const int64_t rows = x.numel() / shared.in;
  const bool float_rows = x.scalar_type() == at::kFloat;
  std::vector<at::Tensor> ys;
  ys.reserve(count);
  absl::InlinedVector<int64_t, 4> shape(x.sizes().begin(), x.sizes().end());
  const at::TensorOptions options = x.options().memory_format(at::MemoryFormat::Contiguous);
  int64_t all_outputs = 0;
  for (const loader::PackedLayout& layout : layouts) {
    shape.back() = layout.out;
    ys.push_back(at::empty(at::IntArrayRef(shape.data(), shape.size()), options));
    all_outputs += layout.out;
  }
  if (rows == 0) return ys;
  // Reused per thread: a decode step's many products would otherwise allocate them each time.
  thread_local base::CacheLineVector<float> x_buffer, y_buffer, group_sums;
  thread_local std::vector<base::CacheLineVector<float>> bias_buffers;
  if (bias_buffers.size() < count) bias_buffers.resize(count);
  at::Tensor x_widened;
  absl::InlinedVector<at::Tensor, kInlineWeights> biases_widened(count);
  const float* xs = FloatValues(x, x_buffer, x_widened);
  if (!float_rows) y_buffer.resize(static_cast<size_t>(rows * all_outputs));
  const int64_t groups = shared.groups();
  group_sums.resize(static_cast<size_t>(rows * groups));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      group_sums[static_cast<size_t>(r * groups + g)] =
          SumInFixedOrder(xs + r * shared.in + g * shared.group_size, shared.group_size);
    }
  }
  absl::InlinedVector<QuantOperands, kInlineWeights> ops;
  // Task t of the loop is task t - first_task[i] of weight i.
  absl::InlinedVector<int64_t, kInlineWeights + 1> first_task(count + 1, 0);
  int64_t y_offset = 0;
  for (size_t i = 0; i < count; ++i) {
    const loader::PackedLayout& layout = layouts[i];
    const at::Tensor& bias = biases[i];
    const float* bias32 =
        bias.defined() ? FloatValues(bias, bias_buffers[i], biases_widened[i]) : nullptr;
    float* y = float_rows ? ys[i].data_ptr<float>() : y_buffer.data() + rows * y_offset;
    y_offset += layout.out;
    ops.push_back(QuantOperands{xs,
                                group_sums.data(),
                                static_cast<const uint8_t*>(weights[i].data_ptr()),
                                bias32,
                                y,
                                rows,
                                layout.in,
                                layout.out,
                                layout.bits,
                                layout.group_size,
                                groups,
                                layout.block_bytes(),
                                StreamAheadRows(groups * layout.block_bytes())});
    first_task[i + 1] =
        first_task[i] + (layout.out + outputs_per_task - 1) / outputs_per_task;
  }
  prepare(ops[0]);
  absl::InlinedVector<c10::BFloat16*, kInlineWeights> bf16_outputs(count, nullptr);
  if (!float_rows) {
    for (size_t i = 0; i < count; ++i) bf16_outputs[i] = ys[i].data_ptr<c10::BFloat16>();
  }
  const auto run_tasks = [&](int64_t begin, int64_t end) {
    for (size_t i = 0; i < count && begin < end; ++i) {
      if (begin >= first_task[i + 1]) continue;
      const int64_t stop = std::min(end, first_task[i + 1]);
      const int64_t out = ops[i].out;
      const int64_t n0 = (begin - first_task[i]) * outputs_per_task;
      const int64_t n1 = std::min(out, (stop - first_task[i]) * outputs_per_task);
      outputs(ops[i], n0, n1);
      // BF16 results rounded by the task that computed them, while they are in its cache: on
      // the calling thread after the loop, a ~1.1B decode step's ~0.4M roundings ran while
      // the helpers waited.
      if (c10::BFloat16* rounded = bf16_outputs[i]) {
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t n = n0; n < n1; ++n) rounded[r * out + n] = c10::BFloat16(ops[i].y[r * out + n]);
        }
      }
      begin = stop;
    }
  };
  // A pointer to the lambda fits std::function's own storage (the lambda's many references
  // would be a heap block per call).
  const SpinningWorkers::RangeFn run = [tasks_of = &run_tasks](int64_t begin, int64_t end) {
    (*tasks_of)(begin, end);
  };
  const int64_t tasks = first_task[count];
  if (!SpinningWorkers::Shared().TryRun(tasks, run)) at::parallel_for(0, tasks, 1, run);
  // A decode step's buffers stay for the next call; a long prompt's (or an all-positions
  // Forward's logits) are given back, not held by the thread for the process's lifetime.
  constexpr size_t kKeptFloats = size_t{1} << 20;  // 4 MiB each
  for (base::CacheLineVector<float>* buffer : {&x_buffer, &y_buffer, &group_sums}) {
    if (buffer->capacity() > kKeptFloats) base::CacheLineVector<float>().swap(*buffer);
  }
  for (base::CacheLineVector<float>& buffer : bias_buffers) {
    if (buffer.capacity() > kKeptFloats) base::CacheLineVector<float>().swap(buffer);
  }
  return ys;
}

}  // namespace placer::model
