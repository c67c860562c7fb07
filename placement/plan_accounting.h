// Turns "which device holds each placement unit" into a Plan: the compact
// device map and per-device weights and reserves. The planner and the
// device-map validator share it so both count reserves the same way.
#pragma once

#include <cstdint>
#include <vector>

#include "placement/budget.h"
#include "placement/device_roles.h"
#include "placement/module_tree.h"
#include "placement/placement_pass.h"
#include "placement/placement_units.h"
#include "placement/plan.h"

namespace placer::placement {

// What the execution device must hold for the offloaded units: staging room
// for two copies of the largest offloaded group and the KV cache of offloaded layers.
OffloadReserve OffloadNeeds(const PlacementUnits& units, const DeviceRoles& roles,
                            const std::vector<int>& unit_device);

// Fills tensor_devices, device_map and devices. `reserve` is what the
// execution device holds back for offloaded units (at least OffloadNeeds).
void AccountPlan(const ModuleTree& tree, const PlacementUnits& units,
                 const std::vector<DeviceBudget>& budgets, const DeviceRoles& roles,
                 const std::vector<int>& unit_device, std::uint64_t activation_reserve_bytes,
                 const OffloadReserve& reserve, Plan& plan);

}  // namespace placer::placement
