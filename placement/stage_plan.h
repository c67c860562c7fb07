// Planning a pipeline group (DESIGN words: stage): the decoder layers are cut into
// contiguous runs, one per node in rank order (one hop per node boundary), each node's share
// in proportion to what it can hold (its GPU and cpu budgets); the leader (rank 0) also holds
// what comes before and after the layers (embeddings, final norm, lm_head, so tied
// embeddings stay in one process). Each share is then planned over its node's own devices by
// the existing planner (BuildPlan with PlanCommandArgs::stage_modules): budgets, reserves,
// offload, the KV cache of its layers on it.
//
// In a group's device map a device carries its node: "node1:cuda:0", "node0:cpu".
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/plan.h"
#include "placement/plan_command.h"

namespace placer::placement {

struct StageShare {
  int rank = 0;
  std::int64_t first_layer = 0;  // decoder layers [first_layer, end_layer)
  std::int64_t end_layer = 0;
  std::size_t first_layer_block = 0;      // index of decoder layer 0 among the blocks
  std::vector<std::string> blocks;        // block modules this stage runs, in execution order
  std::vector<std::string> other_blocks;  // the blocks the other stages run
};

// What a node can hold for a share: the budgets of its GPUs and cpu (not disk), from its
// --devices / probe and --max-memory exactly as its own plan will count them.
absl::StatusOr<std::uint64_t> StageCapacityBytes(const PlacementOptions& options);

// Cuts the checkpoint's decoder layers over nodes of `capacities` bytes (at least one layer
// each; an error when there are fewer layers than nodes).
absl::StatusOr<std::vector<StageShare>> SplitStages(const std::string& checkpoint_dir,
                                                    const std::vector<std::uint64_t>& capacities);

// The share's plan over this node's devices (`args.placement`), with other_stage_blocks set.
absl::StatusOr<Plan> PlanStage(PlanCommandArgs args, const StageShare& share);

// One node's part of a group's plan.
struct NodePlan {
  std::uint64_t capacity_bytes = 0;  // StageCapacityBytes of its options
  StageShare share;
  Plan plan;  // over its devices
};

// The group's plan over every node's options (rank order; `args.placement` for the rest):
// capacities, the cut, each share planned. What `placer plan --nodes` prints and what a
// group's leader sends every rank (server/stage_group.h). Errors name the node.
absl::StatusOr<std::vector<NodePlan>> PlanGroup(const PlanCommandArgs& args,
                                                const std::vector<PlacementOptions>& nodes);

// "node1:cuda:0"
std::string NodeDeviceName(int node, const Device& device);

// The share's device map per block (a stage's own map is as coarse as its plan: often one
// "" entry), so a group's map names every block's node; entries finer than a block stay.
std::vector<std::pair<std::string, Device>> StageDeviceMap(const Plan& plan,
                                                           const StageShare& share);

// `placer plan --nodes NODES.json`: NODES.json is a JSON array with one --devices string per
// node ("cuda:0=24GiB,cpu=64GiB"), rank order. Plans every node's share and prints each
// node's plan and the group's device map (table), or one JSON document.
absl::Status RunGroupPlanCommand(const PlanCommandArgs& args, const std::string& nodes_path,
                                 std::ostream& out);

}  // namespace placer::placement
