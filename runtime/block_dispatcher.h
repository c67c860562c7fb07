// The hooks that enforce a plan at run time (Accelerate's dispatch_model + AlignDevicesHook):
// every block runs on its execution device with its weights there, its inputs are moved to
// it on entry, and offloaded blocks get their weights staged in, the next one while the
// current one computes. Model code asks for weights and never names a device.
#pragma once

#include <ATen/ATen.h>

#include <initializer_list>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "loader/checkpoint.h"
#include "runtime/block_spec.h"
#include "runtime/device_transfer.h"
#include "runtime/runtime_accounting.h"
#include "runtime/runtime_plan.h"
#include "runtime/staging_stream.h"
#include "runtime/weight_stager.h"

namespace placer::runtime {

class BlockDispatcher {
 public:
  // Binds every block's weights where the plan puts them: read onto its GPU (a real copy into
  // host memory for a virtual GPU), kept in host memory for cpu, left in the mapped files for
  // disk (converted copies go to the offload dir). Errors name the block and tensor.
  static absl::StatusOr<std::unique_ptr<BlockDispatcher>> Create(
      std::shared_ptr<const loader::Checkpoint> checkpoint, std::vector<BlockSpec> blocks,
      const RuntimePlan& plan, at::ScalarType dtype,
      std::shared_ptr<RuntimeAccounting> accounting);
  ~BlockDispatcher();

  size_t block_count() const { return blocks_.size(); }
  const BlockSpec& spec(size_t block) const { return blocks_[block].spec; }
  // Where the plan put the block's weights.
  const Device& weights_device(size_t block) const { return blocks_[block].weights_device; }
  // Where its arithmetic runs: its GPU, or the execution device when offloaded.
  const Device& execution_device(size_t block) const { return blocks_[block].execution_device; }
  at::Device torch_device(size_t block) const;
  // Weights copied onto the execution device for each use.
  bool staged(size_t block) const { return blocks_[block].staged; }
  const DeviceTransfer& transfer() const { return transfer_; }
  RuntimeAccounting& accounting() const { return *accounting_; }

  // One forward pass through the blocks in order. Passes run one at a time: they share the
  // staging slots and the devices' streams.
  class Pass {
   public:
    explicit Pass(BlockDispatcher& dispatcher);
    ~Pass();
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;

    // Moves `activations` from `*current` to the block's execution device (updating
    // *current) and returns the block's weights there, valid until the next Enter.
    const BlockWeights& Enter(size_t block, std::initializer_list<at::Tensor*> activations,
                              Device* current);

   private:
    void ReleaseStaged();

    BlockDispatcher& dispatcher_;
    std::unique_lock<std::mutex> lock_;
    std::shared_ptr<const BlockWeights> staged_weights_;
    size_t staged_block_ = 0;
  };

 private:
  struct BoundBlock {
    BlockSpec spec;
    Device weights_device;
    Device execution_device;
    bool staged = false;
    // On the execution device, or (when staged) the source the staging copies from.
    BlockWeights weights;
  };

  BlockDispatcher(bool virtual_gpus, std::shared_ptr<RuntimeAccounting> accounting)
      : transfer_(virtual_gpus, accounting.get()), accounting_(std::move(accounting)) {}
  // Copies the block's weights into `region` of a staging slot (views of its buffer).
  BlockWeights Stage(size_t block, StagingRegion region, bool background) const;
  uint64_t SlotBytes(size_t block) const;  // its weights' bytes in a slot, aligned
  void AllocateStagingSlots(const Device& execution_device);
  void ReadAhead(size_t block) const;
  size_t NextStaged(size_t block) const;  // cyclic: the next pass starts over
  size_t NextOnDisk(size_t block) const;

  std::vector<BoundBlock> blocks_;
  DeviceTransfer transfer_;
  std::shared_ptr<RuntimeAccounting> accounting_;
  bool prefetch_ = true;
  // The plan's two staging slots, allocated once on the execution device and sized for the
  // largest staged block: staging copies into them instead of allocating (and, in host
  // memory, page-faulting) every staged byte on every pass. A slot holds several smaller
  // blocks at once, so the stager runs ahead of compute by up to a slot's bytes.
  std::vector<at::Tensor> staging_slots_;
  uint64_t staging_slot_bytes_ = 0;
  mutable std::vector<SlotFence> slot_fences_;
  std::unique_ptr<WeightStager> stager_;
  std::mutex pass_mutex_;
};

}  // namespace placer::runtime
