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

at::Tensor InputGather::For(size_t slot) {
  const at::Tensor order = orders_.Find(block_, slot, x_.device());
  if (!order.defined()) return x_;
  // Orders shared within a block are one host tensor; their device copies share a key too.
  const void* key = orders_.Find(block_, slot, at::Device(at::kCPU)).data_ptr();
  for (const auto& [seen, gathered] : gathered_) {
    if (seen == key) return gathered;
  }
  at::Tensor gathered = x_.index_select(-1, order);
  gathered_.emplace_back(key, gathered);
  return gathered;
}

}  // namespace placer::model
