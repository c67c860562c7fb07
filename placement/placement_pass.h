// One walk of the module tree that places every block (see planner.h for the
// rules). Internal to the planner: PlanPlacement runs it until the offload
// reserves it assumed cover what it offloaded.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "placement/budget.h"
#include "placement/device_roles.h"
#include "placement/module_tree.h"
#include "placement/placement_units.h"
#include "placement/plan.h"
#include "placement/planner.h"

namespace placer::placement {

// Reserves on the execution device that depend on what gets offloaded.
struct OffloadReserve {
  std::uint64_t slots = 2;
  std::uint64_t staging = 0;
  std::uint64_t offloaded_kv = 0;

  explicit OffloadReserve(int staging_slots) : slots(static_cast<std::uint64_t>(staging_slots)) {}

  // Counts one offloaded block. Staging keeps `slots` buffers, each able to hold the largest
  // block (the runtime's WeightStager allocates exactly these).
  void AddOffloaded(std::uint64_t weights_bytes, std::uint64_t kv_bytes) {
    offloaded_kv += kv_bytes;
    staging = std::max(staging, slots * weights_bytes);
  }
};

// The walk's two departures from one contiguous run per device (planner.h): a block too big
// for the still-empty current GPU goes ahead to another GPU, and a block to be offloaded goes
// back once to a GPU whose run ended with room. PlanPlacement drops them when a plan would
// hop more than its bound allows.
struct Detours {
  bool go_ahead = true;
  bool return_to_gpu = true;
};

// The first block that fit nowhere.
struct Failure {
  std::string block;
  std::uint64_t needs = 0;
  std::uint64_t most_room = 0;
  std::string most_room_device;
};

struct PassResult {
  std::optional<Failure> failure;
  std::vector<int> unit_device;  // index into budgets, per unit
  std::vector<PlacementStep> steps;
  std::vector<std::pair<std::string, std::string>> reasons;  // step name -> why
};

PassResult RunPlacementPass(const ModuleTree& tree, const PlacementUnits& units,
                            const std::vector<DeviceBudget>& budgets, const DeviceRoles& roles,
                            const PlanOptions& options, const OffloadReserve& reserve,
                            Detours detours);

}  // namespace placer::placement
