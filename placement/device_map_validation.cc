#include "placement/device_map_validation.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "placement/byte_size.h"
#include "placement/device_roles.h"
#include "placement/plan_accounting.h"
#include "placement/placement_units.h"

namespace placer::placement {
namespace {

absl::Status Invalid(absl::string_view key, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("device map entry '", key, "': ", why));
}

std::string Quote(const std::string& name) { return absl::StrCat("'", name, "'"); }

// The no-split block that `name` lies strictly inside, if any.
std::optional<int> SplitBlock(const ModuleTree& tree, int first_outer_module) {
  std::optional<int> block;
  for (int m = first_outer_module; m >= 0; m = tree.modules()[m].parent) {
    if (tree.modules()[m].no_split) block = m;
  }
  return block;
}

// The user's map accounted with one way of running offloaded blocks; an error names the
// first entry that overfills a device.
absl::StatusOr<Plan> AccountUserMap(const ModuleTree& tree, const DeviceMap& map,
                                    const std::vector<DeviceBudget>& budgets,
                                    const ExecutionChoice& choice,
                                    std::uint64_t activation_reserve_bytes,
                                    const PlacementUnits& units,
                                    const std::vector<int>& unit_device,
                                    const std::vector<int>& key_of_tensor) {
  const DeviceRoles roles = AssignDeviceRoles(budgets, choice);
  const OffloadReserve reserve = OffloadNeeds(units, roles, unit_device);
  Plan plan;
  AccountPlan(tree, units, budgets, roles, unit_device, activation_reserve_bytes, reserve, plan);

  for (std::size_t d = 0; d < plan.devices.size(); ++d) {
    const DevicePlan& device = plan.devices[d];
    if (device.left_bytes() >= 0) continue;
    // Name the first entry, in execution order, that pushes it over.
    std::int64_t used = static_cast<std::int64_t>(
        device.activation_reserve_bytes + device.staging_reserve_bytes +
        (static_cast<int>(d) == roles.execution ? reserve.offloaded_kv : 0));
    std::string culprit = "its reserves";
    for (std::size_t u = 0; u < units.units.size() && culprit == "its reserves"; ++u) {
      if (unit_device[u] != static_cast<int>(d)) continue;
      used += static_cast<std::int64_t>(units.units[u].weights_bytes +
                                        (roles.runs_blocks[d] ? units.units[u].kv_bytes : 0));
      if (used > static_cast<std::int64_t>(device.budget_bytes)) {
        culprit = Quote(map[key_of_tensor[units.units[u].tensor_begin]].first);
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "device map overfills ", device.device.Name(), ": weights ",
        FormatBytes(device.weights_bytes), " + reserves ", FormatBytes(device.reserved_bytes()),
        " exceed its budget of ", FormatBytes(device.budget_bytes), " by ",
        FormatBytes(static_cast<std::uint64_t>(-device.left_bytes())), "; entry ", culprit,
        " is the first that does not fit (offloaded blocks ", choice.Describe(budgets), ")"));
  }
  plan.strategy = Strategy::kSequential;
  plan.offload_staged = choice.staged;
  plan.staging_slots = choice.staged ? choice.staging_slots : 0;
  plan.execution_reason = absl::StrCat(choice.Describe(budgets), " (the user's device map)");
  return plan;
}

}  // namespace

absl::StatusOr<Plan> ValidateDeviceMap(const ModuleTree& tree, const DeviceMap& map,
                                       const std::vector<DeviceBudget>& budgets,
                                       const PlanOptions& options) {
  const std::uint64_t activation_reserve_bytes = options.activation_reserve_bytes;
  const auto& tensors = tree.tensors();
  std::vector<int> device_of_tensor(tensors.size(), -1);
  std::vector<int> key_of_tensor(tensors.size(), -1);
  for (std::size_t k = 0; k < map.size(); ++k) {
    const auto& [key, device] = map[k];
    int device_index = -1;
    for (std::size_t d = 0; d < budgets.size(); ++d) {
      if (budgets[d].info.device == device) device_index = static_cast<int>(d);
    }
    if (device_index < 0) {
      std::vector<std::string> names;
      for (const DeviceBudget& b : budgets) names.push_back(b.info.device.Name());
      return Invalid(key, absl::StrCat("unknown device ", device.Name(), " (devices: ",
                                       absl::StrJoin(names, ", "), ")"));
    }
    int begin = 0;
    int end = 0;
    std::optional<int> outer;  // first module above the entry
    if (std::optional<int> module = tree.FindModule(key)) {
      begin = tree.modules()[*module].tensor_begin;
      end = tree.modules()[*module].tensor_end;
      outer = tree.modules()[*module].parent;
    } else if (std::optional<int> tensor = tree.FindTensor(key)) {
      begin = *tensor;
      end = *tensor + 1;
      outer = tensors[*tensor].module;
    } else {
      return Invalid(key, "no such module or tensor in the model");
    }
    if (outer && *outer >= 0) {
      if (std::optional<int> block = SplitBlock(tree, *outer)) {
        const auto& module = tree.modules()[*block];
        return Invalid(key, absl::StrCat("splits the no-split block ", Quote(module.name), " (",
                                         module.class_name, "); map the whole block instead"));
      }
    }
    for (int t = begin; t < end; ++t) {
      if (key_of_tensor[t] >= 0) {
        return Invalid(key, absl::StrCat("tensor ", Quote(tensors[t].name),
                                         " is already covered by entry ",
                                         Quote(map[key_of_tensor[t]].first),
                                         "; every tensor must be covered exactly once"));
      }
      key_of_tensor[t] = static_cast<int>(k);
      device_of_tensor[t] = device_index;
    }
  }
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    if (key_of_tensor[t] < 0) {
      const auto& module = tree.modules()[tensors[t].module];
      return absl::InvalidArgumentError(absl::StrCat(
          "device map does not cover tensor ", Quote(tensors[t].name), " (module ",
          Quote(module.name), ")"));
    }
  }
  for (const std::vector<int>& group : tree.tied_groups()) {
    for (int member : group) {
      if (device_of_tensor[member] != device_of_tensor[group[0]]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "device map entries ", Quote(map[key_of_tensor[group[0]]].first), " (",
            budgets[device_of_tensor[group[0]]].info.device.Name(), ") and ",
            Quote(map[key_of_tensor[member]].first), " (",
            budgets[device_of_tensor[member]].info.device.Name(), ") split the tied tensors ",
            Quote(tensors[group[0]].name), " and ", Quote(tensors[member].name),
            ", which share one storage; put them on one device"));
      }
    }
  }

  const PlacementUnits units = PlacementUnits::FromTree(tree);
  std::vector<int> unit_device(units.units.size());
  for (std::size_t u = 0; u < units.units.size(); ++u) {
    unit_device[u] = device_of_tensor[units.units[u].tensor_begin];
  }
  const std::vector<ExecutionChoice> choices =
      ExecutionChoices(budgets, options.offload_exec, options.prefetch);
  if (choices.empty()) {
    return absl::FailedPreconditionError("no device to run on: neither a GPU nor cpu");
  }
  absl::Status error;
  for (const ExecutionChoice& choice : choices) {
    absl::StatusOr<Plan> plan =
        AccountUserMap(tree, map, budgets, choice, activation_reserve_bytes, units, unit_device,
                       key_of_tensor);
    if (plan.ok()) return plan;
    error = plan.status();
  }
  return error;
}

}  // namespace placer::placement
