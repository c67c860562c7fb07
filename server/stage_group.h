// The rendezvous of a pipeline group (DESIGN words: stage) over the leader's store, before
// anything loads: every rank publishes what it serves (the model's shape, --dtype, the serving
// limits) and its node (devices, budgets, offload); the leader refuses a rank that differs,
// naming the field, and plans over all of them with placement::PlanGroup (what `placer plan
// --nodes` prints for the same devices): the cut of the decoder layers and every node's
// device map, which it publishes. Every rank validates its map over its own devices and
// publishes the plan; the leader refuses a map that does not fit or plans that disagree
// (compute dtype, KV blocks), naming the node. Then every
// rank loads its own tensors and waits for the others (AwaitGroupLoaded).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/plan.h"
#include "placement/plan_command.h"
#include "placement/stage_plan.h"
#include "runtime/stage_link.h"
#include "server/stage_flags.h"

namespace placer::server {

// One stage's memory as its plan has it, for the leader's metrics (label node).
struct StageDeviceFigures {
  int node = 0;
  std::string device;  // "cuda:0", without the node
  uint64_t total_bytes = 0;
  uint64_t weights_bytes = 0;
  uint64_t kv_reserve_bytes = 0;
};

struct StageAssignment {
  std::shared_ptr<runtime::StageLink> link;
  placement::StageShare share;
  placement::Plan plan;  // this node's share, over its own devices
  // Leader only: every node's device map ("node1:cuda:0") and devices.
  std::vector<std::pair<std::string, std::string>> group_device_map;
  std::vector<StageDeviceFigures> group_devices;
};

absl::StatusOr<StageAssignment> JoinStageGroup(const StageOptions& stages,
                                               const std::string& model_dir,
                                               const placement::PlacementOptions& placement);

// Publishes that this rank is loaded and waits (the rendezvous timeout) for every other.
absl::Status AwaitGroupLoaded(runtime::StageLink& link, std::chrono::milliseconds timeout);

// The block the leader runs last before the other stages' layers: where PipelineHook sits.
size_t BoundaryBlock(const placement::StageShare& leader_share);

}  // namespace placer::server
