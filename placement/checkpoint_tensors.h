// Reads what planning needs from a checkpoint directory without reading a
// weight byte: config.json and the safetensors headers. Torch-free (the
// loader's CheckpointFiles lives in the torch-linked placer_loader).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loader/model_config.h"
#include "placement/module_tree.h"

namespace placer::placement {

struct CheckpointSummary {
  loader::ModelConfig config;
  std::vector<TensorSpec> tensors;  // header order per shard, shards sorted
};

absl::StatusOr<CheckpointSummary> ReadCheckpointSummary(const std::string& dir);

}  // namespace placer::placement
