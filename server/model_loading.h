// Opens the checkpoint that --model names and binds it to its architecture. The one place the
// server reaches into loader/ and model/ construction; everything after uses CausalLm.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "placement/plan_command.h"
#include "server/model_slot.h"

namespace placer::server {

// Plans the placement (refusing a model that does not fit, saying by how much), logs the
// plan, and builds the run time from the plan alone (model::LoadPlacedModel). A snapshot in
// state kReady, or an error naming the file, tensor, module or field at fault.
absl::StatusOr<ModelSnapshot> LoadServedModel(const std::string& dir,
                                              placement::PlacementOptions placement);

}  // namespace placer::server
