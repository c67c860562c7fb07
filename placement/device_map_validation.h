// Checks a device map the user gave (--device-map FILE) instead of planning:
// every tensor covered exactly once, only known devices, no no-split block
// split, tied tensors together, and every device within its budget once the
// reserves are counted as the planner counts them. Each violation is an
// InvalidArgument error naming the module (or device) at fault.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/budget.h"
#include "placement/device_map.h"
#include "placement/module_tree.h"
#include "placement/plan.h"
#include "placement/planner.h"

namespace placer::placement {

// On success the Plan has no steps and no reasons: the user decided. Where offloaded blocks
// run is chosen as the planner chooses (options.offload_exec); strategy is not used.
absl::StatusOr<Plan> ValidateDeviceMap(const ModuleTree& tree, const DeviceMap& map,
                                       const std::vector<DeviceBudget>& budgets,
                                       const PlanOptions& options);

}  // namespace placer::placement
