// Stages offloaded blocks onto the execution device (Accelerate's AlignDevicesHook with
// offload, plus prefetch): on Enter a staged block gets its weights copied into one of the
// plan's staging slots (two, or one where the execution device has room for one only),
// allocated once on the execution device and sized for the largest staged block; with two,
// the blocks after it are staged ahead by a background thread (WeightStager) while it
// computes; on Exit its slot room is released.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/block_hook.h"
#include "runtime/staging_stream.h"
#include "runtime/weight_stager.h"

namespace placer::runtime {

class StageWeightsHook final : public BlockHook {
 public:
  // Null when no block is staged. `blocks` and `transfer` must outlive the hook.
  static absl::StatusOr<std::unique_ptr<StageWeightsHook>> Create(
      const std::vector<BoundBlock>& blocks, const DeviceTransfer& transfer,
      RuntimeAccounting* accounting, const Device& execution_device, bool prefetch,
      int staging_slots);
  ~StageWeightsHook() override;

  void Enter(BlockCall& call) override;
  void Exit(BlockCall& call) override;
  void EndPass(at::Tensor* output) override;  // releases a block left held when one threw

 private:
  StageWeightsHook(const std::vector<BoundBlock>& blocks, const DeviceTransfer& transfer,
                   RuntimeAccounting* accounting, bool prefetch)
      : blocks_(blocks), transfer_(transfer), accounting_(accounting), prefetch_(prefetch) {}
  // Copies the block's weights into `region` of a staging slot (views of its buffer).
  BlockWeights Stage(size_t block, StagingRegion region, bool background) const;
  uint64_t SlotBytes(size_t block) const;  // its weights' bytes in a slot, aligned
  size_t NextStaged(size_t block) const;   // cyclic: the next pass starts over
  void Release();

  const std::vector<BoundBlock>& blocks_;
  const DeviceTransfer& transfer_;
  RuntimeAccounting* accounting_;
  bool prefetch_;
  // Two slots: the one holding the block that computes, and one being filled. A slot holds
  // several smaller blocks at once, so the stager runs ahead of compute by up to a slot.
  std::vector<at::Tensor> slots_;
  uint64_t slot_bytes_ = 0;
  mutable std::vector<SlotFence> slot_fences_;
  std::unique_ptr<WeightStager> stager_;
  // The block whose staged weights the current call holds.
  std::shared_ptr<const BlockWeights> held_;
  size_t held_block_ = 0;
};

}  // namespace placer::runtime
