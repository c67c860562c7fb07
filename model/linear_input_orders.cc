#include "model/linear_input_orders.h"

#include "base/status_macros.h"
#include "loader/prequantized_repack.h"

namespace placer::model {

absl::StatusOr<std::shared_ptr<const LinearInputOrders>> LinearInputOrders::Read(
    const loader::Checkpoint& checkpoint, const loader::ArchitectureDescription& architecture) {
  auto out = std::make_shared<LinearInputOrders>();
  for (size_t block = 0; block < architecture.blocks.size(); ++block) {
    std::vector<at::Tensor> in_block;
    const auto& tensors = architecture.blocks[block].tensors;
    for (size_t slot = 0; slot < tensors.size(); ++slot) {
      const loader::QuantizedLinearSource* source = checkpoint.QuantizedLinear(tensors[slot].name);
      if (source == nullptr) continue;
      PLACER_ASSIGN_OR_RETURN(at::Tensor order, loader::QuantizedInputOrder(checkpoint, *source));
      if (!order.defined()) continue;
      for (const at::Tensor& seen : in_block) {
        if (seen.sizes() == order.sizes() && seen.equal(order)) {
          order = seen;
          break;
        }
      }
      in_block.push_back(order);
      if (out->orders_.empty()) out->first_slot_name_ = tensors[slot].name;
      out->orders_.emplace(std::make_pair(block, slot), order);
    }
  }
  return std::shared_ptr<const LinearInputOrders>(std::move(out));
}

at::Tensor LinearInputOrders::Find(size_t block, size_t slot, const at::Device& device) const {
  const auto it = orders_.find({block, slot});
  if (it == orders_.end()) return at::Tensor();
  if (device.is_cpu()) return it->second;
  std::lock_guard<std::mutex> lock(mutex_);
  // Keyed by the host tensor, so that orders shared within a block share their copy.
  auto key = std::make_pair(static_cast<const void*>(it->second.data_ptr()), device.str());
  auto copy = on_device_.find(key);
  if (copy == on_device_.end()) {
    copy = on_device_.emplace(std::move(key), it->second.to(device)).first;
  }
  return copy->second;
}

namespace {

// x[:, order] for a decode step's few rows on the CPU without ATen's index_select dispatch,
// which costs more than the copy there (a few microseconds per call, four calls per layer).
template <typename T>
at::Tensor GatherColumns(const at::Tensor& x, const at::Tensor& order) {
  const int64_t rows = x.size(0), width = x.size(1);
  at::Tensor out = at::empty({rows, width}, x.options());
  const T* in = x.data_ptr<T>();
  const int32_t* index = order.data_ptr<int32_t>();
  T* to = out.data_ptr<T>();
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = in + r * width;
    T* out_row = to + r * width;
    for (int64_t i = 0; i < width; ++i) out_row[i] = row[index[i]];
  }
  return out;
}

at::Tensor Gather(const at::Tensor& x, const at::Tensor& order) {
  if (x.device().is_cpu() && x.dim() == 2 && x.is_contiguous() && order.scalar_type() == at::kInt &&
      order.is_contiguous() && x.size(1) == order.numel()) {
    if (x.scalar_type() == at::kFloat) return GatherColumns<float>(x, order);
    if (x.scalar_type() == at::kBFloat16) return GatherColumns<at::BFloat16>(x, order);
  }
  return x.index_select(-1, order);
}

}  // namespace

at::Tensor InputGather::For(size_t slot) {
  const at::Tensor order = orders_.Find(block_, slot, x_.device());
  if (!order.defined()) return x_;
  // Orders shared within a block are one host tensor; their device copies share a key too.
  const void* key = orders_.Find(block_, slot, at::Device(at::kCPU)).data_ptr();
  for (const auto& [seen, gathered] : gathered_) {
    if (seen == key) return gathered;
  }
  at::Tensor gathered = Gather(x_, order);
  gathered_.emplace_back(key, gathered);
  return gathered;
}

}  // namespace placer::model
