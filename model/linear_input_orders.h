// GPTQ activation order (desc_act) at run time: a linear weight repacked with its inputs
// reordered (loader/prequantized_repack.h) multiplies its input gathered in the same order,
// y = W[:, order] · x[order]. The orders are read once at bind from the checkpoint's g_idx
// (a few bytes per input, held in host memory beside the plan) and copied to an execution
// device the first time a block runs there.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "loader/architectures/architecture.h"
#include "loader/checkpoint.h"

namespace placer::model {

class LinearInputOrders {
 public:
  // The order of every pre-quantized linear slot of `architecture` whose inputs the checkpoint
  // reorders. Equal orders within a block (q, k and v see the same input, so GPTQ orders them
  // alike) share one tensor, which InputGather gathers once. Errors are g_idx's.
  static absl::StatusOr<std::shared_ptr<const LinearInputOrders>> Read(
      const loader::Checkpoint& checkpoint, const loader::ArchitectureDescription& architecture);

  bool empty() const { return orders_.empty(); }
  // The first slot with an order, by checkpoint name (for errors of models that have none).
  const std::string& first_slot_name() const { return first_slot_name_; }

  // Block `block`'s slot `slot` order on `device` (int32 [in]), or an undefined tensor.
  // Thread-safe.
  at::Tensor Find(size_t block, size_t slot, const at::Device& device) const;

 private:
  std::map<std::pair<size_t, size_t>, at::Tensor> orders_;  // host memory
  std::string first_slot_name_;
  mutable std::mutex mutex_;
  mutable std::map<std::pair<const void*, std::string>, at::Tensor> on_device_;
};

// One input x [rows, in] of a block's linear maps, gathered once per distinct order.
class InputGather {
 public:
  InputGather(const LinearInputOrders& orders, size_t block, at::Tensor x)
      : orders_(orders), block_(block), x_(std::move(x)) {}

  // x in the order of block slot `slot`'s weight (x itself when it has none).
  at::Tensor For(size_t slot);

 private:
  const LinearInputOrders& orders_;
  size_t block_;
  at::Tensor x_;
  std::vector<std::pair<const void*, at::Tensor>> gathered_;  // by order's storage
};

}  // namespace placer::model
