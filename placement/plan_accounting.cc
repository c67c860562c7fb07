#include "placement/plan_accounting.h"

#include <algorithm>

#include "placement/device_map.h"

namespace placer::placement {

OffloadReserve OffloadNeeds(const PlacementUnits& units, const DeviceRoles& roles,
                            const std::vector<int>& unit_device) {
  OffloadReserve needs(roles.staging_slots);
  for (const UnitGroup& group : units.groups) {
    const int device = unit_device[group.units[0]];
    if (device < 0 || !roles.IsOffload(device)) continue;
    needs.AddOffloaded(group.staged_when_offloaded ? group.weights_bytes : 0, group.kv_bytes);
  }
  return needs;
}

void AccountPlan(const ModuleTree& tree, const PlacementUnits& units,
                 const std::vector<DeviceBudget>& budgets, const DeviceRoles& roles,
                 const std::vector<int>& unit_device, std::uint64_t activation_reserve_bytes,
                 const OffloadReserve& reserve, Plan& plan) {
  plan.devices.clear();
  for (std::size_t d = 0; d < budgets.size(); ++d) {
    DevicePlan device;
    device.device = budgets[d].info.device;
    device.description = budgets[d].info.description;
    device.budget_source = budgets[d].source;
    device.budget_bytes = budgets[d].limit_bytes;
    device.total_bytes = budgets[d].info.total_bytes;
    device.free_bytes = budgets[d].info.free_bytes;
    if (roles.runs_blocks[d]) device.activation_reserve_bytes = activation_reserve_bytes;
    if (static_cast<int>(d) == roles.execution) {
      device.staging_reserve_bytes = reserve.staging;
      device.kv_reserve_bytes = reserve.offloaded_kv;
    }
    plan.devices.push_back(device);
  }
  plan.execution_device =
      roles.execution >= 0 ? budgets[roles.execution].info.device : Device::Cpu();

  plan.tensor_devices.assign(tree.tensors().size(), Device::Cpu());
  for (std::size_t u = 0; u < units.units.size(); ++u) {
    const int d = unit_device[u];
    if (d < 0) continue;
    const PlacementUnit& unit = units.units[u];
    DevicePlan& device = plan.devices[d];
    device.weights_bytes += unit.weights_bytes;
    if (roles.runs_blocks[d]) device.kv_reserve_bytes += unit.kv_bytes;
    for (int t = unit.tensor_begin; t < unit.tensor_end; ++t) {
      plan.tensor_devices[t] = device.device;
    }
  }
  plan.device_map = CompactDeviceMap(tree, plan.tensor_devices);
  std::vector<Device> execution(plan.tensor_devices.size());
  for (std::size_t t = 0; t < execution.size(); ++t) {
    execution[t] = BlockExecutionDevice(plan.tensor_devices[t], tree.tensors()[t].row_lookup,
                                        plan.execution_device);
  }
  plan.execution_map = CompactDeviceMap(tree, execution);
}

}  // namespace placer::placement
