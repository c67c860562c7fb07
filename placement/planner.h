// The planner: Accelerate's infer_auto_device_map, with room for the KV
// cache, activations and staging of offloaded blocks.
//
// Walks the module tree in execution order. A module that fits on the
// preferred GPU goes there whole; one that does not is split into its items
// (direct tensors and children, in order) unless it is a no-split block. An
// indivisible block that does not fit the preferred GPU goes to the first
// device with room, in this order: the preferred GPU, later GPUs, earlier
// GPUs (so a GPU left with room after a big block moved on is still filled:
// accelerate #3041), then cpu, then disk. A block never lands on a slower
// tier while a faster device has room for it. Tied groups move as one.
//
// Reserves: every GPU keeps the activation reserve; a decoder layer on a GPU
// brings its KV cache with it; the execution device of offloaded blocks (the
// first GPU, or cpu with no GPU) also keeps the KV cache of offloaded layers
// and room to stage offloaded blocks (two slots of the largest one). Those last two depend
// on what is offloaded, so the plan is redone with the larger reserve until
// it covers what the plan offloads.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/budget.h"
#include "placement/device_roles.h"
#include "placement/module_tree.h"
#include "placement/plan.h"

namespace placer::placement {

struct PlanOptions {
  Strategy strategy = Strategy::kSequential;
  // Held back on every GPU with a budget (on cpu when there is none); see
  // placement/reserves.h for the estimate.
  std::uint64_t activation_reserve_bytes = 0;
  OffloadExec offload_exec = OffloadExec::kAuto;
  bool prefetch = true;  // false: staging keeps one slot (--no-prefetch)
};

// Deterministic for equal inputs; time linear in the number of tensors.
// A model that does not fit even with disk is a ResourceExhausted error
// saying by how many bytes.
absl::StatusOr<Plan> PlanPlacement(const ModuleTree& tree,
                                   const std::vector<DeviceBudget>& budgets,
                                   const PlanOptions& options);

}  // namespace placer::placement
