#include "placement/stage_plan.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "loader/architectures/architecture.h"
#include "placement/budget.h"
#include "placement/checkpoint_tensors.h"
#include "placement/device_inventory.h"
#include "placement/memory_flags.h"
#include "placement/plan_report.h"

namespace placer::placement {

absl::StatusOr<std::uint64_t> StageCapacityBytes(const PlacementOptions& options) {
  InventoryOptions inventory;
  if (!options.devices.empty()) {
    PLACER_ASSIGN_OR_RETURN(inventory.virtual_devices, ParseVirtualDevices(options.devices));
  }
  inventory.gpu_probe = options.gpu_probe;
  inventory.offload_dir = options.offload_dir;
  inventory.meminfo_path = options.meminfo_path;
  PLACER_ASSIGN_OR_RETURN(std::vector<DeviceInfo> devices, ProbeDevices(inventory));
  BudgetOptions budget_options;
  budget_options.gpu_memory_utilization = options.gpu_memory_utilization;
  if (!options.max_memory.empty()) {
    PLACER_ASSIGN_OR_RETURN(budget_options.max_memory, ParseMaxMemory(options.max_memory));
  }
  PLACER_ASSIGN_OR_RETURN(std::vector<DeviceBudget> budgets,
                          ComputeBudgets(devices, budget_options));
  std::uint64_t bytes = 0;
  for (const DeviceBudget& budget : budgets) {
    if (budget.info.device.kind != DeviceKind::kDisk) bytes += budget.limit_bytes;
  }
  return bytes;
}

absl::StatusOr<std::vector<StageShare>> SplitStages(const std::string& checkpoint_dir,
                                                    const std::vector<std::uint64_t>& capacities) {
  PLACER_ASSIGN_OR_RETURN(CheckpointSummary checkpoint, ReadCheckpointSummary(checkpoint_dir));
  const loader::ArchitectureDescription architecture =
      loader::DescribeArchitecture(checkpoint.config);
  const int nodes = static_cast<int>(capacities.size());
  std::vector<std::uint64_t> block_bytes(architecture.blocks.size(), 0);
  for (const TensorSpec& tensor : checkpoint.tensors) {
    const std::string name = architecture.CanonicalName(tensor.name);
    std::uint64_t bytes = loader::DTypeSize(tensor.dtype);
    for (std::int64_t dim : tensor.shape) bytes *= static_cast<std::uint64_t>(dim);
    for (size_t b = 0; b < architecture.blocks.size(); ++b) {
      if (IsDottedPrefix(architecture.blocks[b].module, name)) block_bytes[b] += bytes;
    }
  }
  std::vector<size_t> layers;
  std::uint64_t total = 0, leader_extra = 0;
  for (size_t b = 0; b < architecture.blocks.size(); ++b) {
    total += block_bytes[b];
    if (architecture.blocks[b].decoder_layer()) {
      layers.push_back(b);
    } else {
      leader_extra += block_bytes[b];
    }
  }
  if (static_cast<int>(layers.size()) < nodes) {
    return absl::InvalidArgumentError(absl::StrCat(checkpoint_dir, ": ", nodes,
                                                   " stages but the model has only ", layers.size(),
                                                   " decoder layers (each stage runs at least one)"));
  }
  std::uint64_t capacity_total = 0;
  for (std::uint64_t capacity : capacities) capacity_total += capacity;
  // Cumulative share of the bytes through node k, in proportion to capacity (equal shares
  // when no node reports any).
  auto target_through = [&](int k) {
    const long double fraction =
        capacity_total == 0
            ? static_cast<long double>(k + 1) / nodes
            : [&] {
                std::uint64_t through = 0;
                for (int i = 0; i <= k; ++i) through += capacities[static_cast<size_t>(i)];
                return static_cast<long double>(through) / capacity_total;
              }();
    return static_cast<std::uint64_t>(fraction * static_cast<long double>(total));
  };
  std::vector<StageShare> shares(static_cast<size_t>(nodes));
  int node = 0;
  std::uint64_t assigned = leader_extra;
  std::int64_t in_node = 0;
  for (size_t i = 0; i < layers.size(); ++i) {
    const int later_nodes = nodes - 1 - node;
    const auto left = static_cast<int>(layers.size() - i);
    if (node < nodes - 1 && in_node >= 1 && (assigned >= target_through(node) || left <= later_nodes)) {
      ++node;
      in_node = 0;
      shares[static_cast<size_t>(node)].first_layer = static_cast<std::int64_t>(i);
    }
    shares[static_cast<size_t>(node)].end_layer = static_cast<std::int64_t>(i) + 1;
    assigned += block_bytes[layers[i]];
    ++in_node;
  }
  const size_t first_layer_block = layers.front();
  for (int k = 0; k < nodes; ++k) {
    StageShare& share = shares[static_cast<size_t>(k)];
    share.rank = k;
    share.first_layer_block = first_layer_block;
    for (size_t b = 0; b < architecture.blocks.size(); ++b) {
      const std::string& module = architecture.blocks[b].module;
      bool mine = false;
      if (architecture.blocks[b].decoder_layer()) {
        const auto layer = static_cast<std::int64_t>(b - first_layer_block);
        mine = layer >= share.first_layer && layer < share.end_layer;
      } else {
        mine = k == 0;
      }
      (mine ? share.blocks : share.other_blocks).push_back(module);
    }
  }
  return shares;
}

absl::StatusOr<Plan> PlanStage(PlanCommandArgs args, const StageShare& share) {
  args.stage_modules = share.blocks;
  absl::StatusOr<Plan> plan = BuildPlan(args);
  if (!plan.ok()) {
    return absl::Status(plan.status().code(),
                        absl::StrCat("node ", share.rank, " (decoder layers ", share.first_layer,
                                     "..", share.end_layer - 1, "): ", plan.status().message()));
  }
  plan->other_stage_blocks = share.other_blocks;
  return plan;
}

std::string NodeDeviceName(int node, const Device& device) {
  return absl::StrCat("node", node, ":", device.Name());
}

std::vector<std::pair<std::string, Device>> StageDeviceMap(const Plan& plan,
                                                           const StageShare& share) {
  std::vector<std::pair<std::string, Device>> map;
  for (const std::string& block : share.blocks) {
    const std::pair<std::string, Device>* covering = nullptr;
    bool finer = false;
    for (const auto& entry : plan.device_map) {
      if (IsDottedPrefix(entry.first, block)) {
        if (covering == nullptr || entry.first.size() > covering->first.size()) covering = &entry;
      } else if (IsDottedPrefix(block, entry.first)) {
        map.push_back(entry);
        finer = true;
      }
    }
    if (!finer && covering != nullptr) map.emplace_back(block, covering->second);
  }
  return map;
}

absl::StatusOr<std::vector<NodePlan>> PlanGroup(const PlanCommandArgs& args,
                                                const std::vector<PlacementOptions>& nodes) {
  std::vector<std::uint64_t> capacities;
  for (size_t k = 0; k < nodes.size(); ++k) {
    absl::StatusOr<std::uint64_t> capacity = StageCapacityBytes(nodes[k]);
    if (!capacity.ok()) {
      return absl::Status(capacity.status().code(),
                          absl::StrCat("node ", k, ": ", capacity.status().message()));
    }
    capacities.push_back(*capacity);
  }
  PLACER_ASSIGN_OR_RETURN(std::vector<StageShare> shares, SplitStages(args.checkpoint_dir, capacities));
  std::vector<NodePlan> group;
  for (const StageShare& share : shares) {
    PlanCommandArgs node_args = args;
    node_args.placement = nodes[static_cast<size_t>(share.rank)];
    PLACER_ASSIGN_OR_RETURN(Plan plan, PlanStage(node_args, share));
    group.push_back({capacities[static_cast<size_t>(share.rank)], share, std::move(plan)});
  }
  return group;
}

absl::Status RunGroupPlanCommand(const PlanCommandArgs& args, const std::string& nodes_path,
                                 std::ostream& out) {
  if (args.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError("--nodes plans a checkpoint's decoder layers: give its directory");
  }
  std::ifstream file(nodes_path);
  if (!file) return absl::NotFoundError(absl::StrCat("--nodes ", nodes_path, ": cannot read it"));
  const nlohmann::json nodes = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  if (!nodes.is_array() || nodes.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--nodes ", nodes_path, ": expected a JSON array of at least 2 --devices strings, one per node"));
  }
  std::vector<PlacementOptions> options;
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (!nodes[k].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--nodes ", nodes_path, ": [", k, "] is not a --devices string"));
    }
    PlacementOptions node = args.placement;
    node.devices = nodes[k].get<std::string>();
    options.push_back(node);
  }
  absl::StatusOr<std::vector<NodePlan>> group = PlanGroup(args, options);
  if (!group.ok()) {
    return absl::Status(group.status().code(),
                        absl::StrCat("--nodes ", nodes_path, ": ", group.status().message()));
  }
  nlohmann::ordered_json json;
  nlohmann::ordered_json group_map = nlohmann::ordered_json::object();
  std::string tables;
  for (const NodePlan& node : *group) {
    const StageShare& share = node.share;
    for (const auto& [module, device] : StageDeviceMap(node.plan, share)) {
      group_map[module] = NodeDeviceName(share.rank, device);
    }
    nlohmann::ordered_json stage;
    stage["node"] = share.rank;
    stage["decoder_layers"] = {share.first_layer, share.end_layer};
    stage["plan"] = PlanToJson(node.plan);
    json["stages"].push_back(stage);
    absl::StrAppend(&tables, "node ", share.rank, " (", options[static_cast<size_t>(share.rank)].devices,
                    "): decoder layers ", share.first_layer, "..", share.end_layer - 1, "\n",
                    PlanToTable(node.plan), "\n");
  }
  json["device_map"] = group_map;
  if (args.format == "json") {
    out << json.dump(2) << "\n";
  } else {
    out << tables << "group device map:\n" << group_map.dump(2) << "\n";
  }
  return absl::OkStatus();
}

}  // namespace placer::placement
