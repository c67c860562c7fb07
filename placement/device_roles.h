// What each budgeted device does at run time, shared by the planner and the
// device-map validator so both account reserves the same way.
#pragma once

#include <vector>

#include "placement/budget.h"

namespace placer::placement {

struct DeviceRoles {
  // Index into the budgets of the execution device of offloaded blocks: the
  // first GPU with a budget, else cpu. -1 only without cpu and GPUs.
  int execution = -1;
  bool has_gpu = false;
  // Runs blocks: keeps the activation reserve and the KV cache of the
  // layers placed on it. Every GPU with a budget; cpu when there is none.
  std::vector<bool> runs_blocks;

  // Blocks here are staged onto the execution device to run.
  bool IsOffload(int device) const { return !runs_blocks[device]; }
};

DeviceRoles AssignDeviceRoles(const std::vector<DeviceBudget>& budgets);

}  // namespace placer::placement
