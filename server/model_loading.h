// Opens the checkpoint that --model names and binds it to its architecture. The one place the
// server reaches into loader/ and model/ construction; everything after uses CausalLm.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/plan_command.h"
#include "server/model_slot.h"

namespace placer::runtime {
class BlockHook;
}

namespace placer::server {

// The leader of a pipeline group loads its own share (stage_group.h) with the hook that
// carries each pass across the other stages, and reports the group's device map.
struct StagedLoad {
  placement::Plan plan;
  std::vector<std::shared_ptr<runtime::BlockHook>> hooks;
  std::vector<std::pair<std::string, std::string>> group_device_map;  // "node1:cuda:0"
};

// Plans the placement (refusing a model that does not fit, saying by how much), logs the
// plan, and builds the run time from the plan alone (model::LoadPlacedModel). A snapshot in
// state kReady, or an error naming the file, tensor, module or field at fault.
absl::StatusOr<ModelSnapshot> LoadServedModel(const std::string& dir,
                                              placement::PlacementOptions placement,
                                              const StagedLoad* staged = nullptr);

}  // namespace placer::server
