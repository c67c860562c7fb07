// Load-time binding of a plan: every block's weights read once to where the plan puts them,
// before any call. What happens on each call is the hooks' (block_hook.h).
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "loader/checkpoint.h"
#include "runtime/block_spec.h"
#include "runtime/device_transfer.h"
#include "runtime/runtime_accounting.h"
#include "runtime/runtime_plan.h"

namespace placer::runtime {

struct BoundBlock {
  BlockSpec spec;
  Device weights_device;    // where the plan put its weights
  Device execution_device;  // where its arithmetic runs: its GPU, or the execution device when staged
  bool staged = false;      // weights copied onto the execution device for each use
  // Run by another pipeline stage (RuntimePlan::other_stage_blocks): no weights here, never
  // entered; the model skips it.
  bool other_stage = false;
  // On the execution device, or (when staged) the source the staging copies from; undefined
  // for an absent slot.
  BlockWeights weights;
};

// Reads every block's weights where the plan puts them: onto its GPU (a real copy into host
// memory for a virtual GPU), host memory for cpu (pinned when CUDA executes), the mapped files
// for disk (converted copies through the offload store in plan.offload_dir). A tensor is read
// once per device, so tied weights are held once. Errors name the block and tensor; a block
// split over devices is refused.
absl::StatusOr<std::vector<BoundBlock>> BindBlocks(
    const std::shared_ptr<const loader::Checkpoint>& checkpoint, std::vector<BlockSpec> blocks,
    const RuntimePlan& plan, at::ScalarType dtype, RuntimeAccounting* accounting);

}  // namespace placer::runtime
