#include "placement/device_roles.h"

namespace placer::placement {

DeviceRoles AssignDeviceRoles(const std::vector<DeviceBudget>& budgets) {
  DeviceRoles roles;
  roles.runs_blocks.assign(budgets.size(), false);
  int cpu = -1;
  for (int d = 0; d < static_cast<int>(budgets.size()); ++d) {
    const Device& device = budgets[d].info.device;
    if (device.is_gpu() && budgets[d].limit_bytes > 0) {
      roles.runs_blocks[d] = true;
      if (!roles.has_gpu) roles.execution = d;
      roles.has_gpu = true;
    }
    if (device.kind == DeviceKind::kCpu && cpu < 0) cpu = d;
  }
  if (!roles.has_gpu && cpu >= 0) {
    roles.execution = cpu;
    roles.runs_blocks[cpu] = true;
  }
  return roles;
}

}  // namespace placer::placement
