// The part of a model one pipeline stage holds: the tensors under some of its modules (the
// blocks a stage runs), with the KV reserves and tied groups that stay within them, so the
// existing planner plans a stage's share exactly as it plans a whole model.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/module_tree.h"

namespace placer::placement {

// Tensors under any of `modules` (dotted prefixes). A tied group keeps its members inside
// the share; one with a member on each side is an error naming it (its storage cannot be in
// two processes at once).
absl::StatusOr<ModuleTreeSpec> SubtreeSpec(const ModuleTreeSpec& spec,
                                           const std::vector<std::string>& modules);

}  // namespace placer::placement
