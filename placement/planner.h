// The planner: Accelerate's infer_auto_device_map, with room for the KV
// cache, activations and staging of offloaded blocks, and few device hops.
//
// The walk. The module tree is walked in execution order. A module goes whole
// to the current device if it fits there; otherwise it is split into its items
// (direct tensors and children, in order) unless it is a no-split block. The
// current GPU starts as the first GPU with room. An indivisible block that does
// not fit the current GPU ends that GPU's run once the GPU holds something, and
// the first GPU in index order whose run has not ended and that fits the block
// becomes current (so GPUs passed over while a big block moved on are still
// filled later). While the current GPU is still empty, a block too big for it
// goes ahead to one other GPU (the same one for the whole plan) and the empty
// GPU stays current: a small first GPU still takes the layers after a large
// embedding (accelerate #3041). A block no GPU takes is offloaded: to cpu until
// the first block cpu cannot take, then to disk. A block about to be
// offloaded may instead go back, once per plan, to a GPU whose run ended with
// room left; blocks follow it there while they fit (the final norm and head
// after offloaded layers). Tied groups move as one, with the first member.
//
// What that guarantees, and the property test checks over random trees and
// budgets: every tensor placed once, no-split blocks and tied groups whole,
// every budget kept; in execution order (leaving out tensors a tie brought
// along), device switches <= devices used + offloaded runs (maximal runs of
// tensors off the GPUs); and no GPU is left empty that had room for a block
// placed on a slower tier. The two detours (going ahead, going back) are
// dropped, going back first, for any plan that would switch more often; without
// them every device holds one contiguous run, which always keeps the bound.
//
// balanced / balanced_low_0 cap each GPU but the last at total / n + largest
// block (Accelerate's get_balanced_memory); when the GPUs overflow their
// shares, the sequential plan (each GPU's full room) is taken if it keeps more
// on the GPUs.
//
// Reserves: every GPU keeps the activation reserve; a decoder layer on a GPU
// brings its KV cache with it; the execution device of offloaded blocks also
// keeps the KV cache of offloaded layers and its staging room. Those last two
// depend on what is offloaded, so the plan is redone with the larger reserve
// until it covers what the plan offloads.
//
// Where offloaded blocks run (--offload-exec, device_roles.h): the first that
// fits of staged onto a GPU through two slots of the largest offloaded block
// (each GPU in order), through one slot (no prefetch), then (auto only) run on
// the cpu where their weights live, with the cpu keeping the activation reserve,
// their KV cache and read-ahead room for two disk blocks. placement/README.md
// says why in that order and what it assumes of the hardware.
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
