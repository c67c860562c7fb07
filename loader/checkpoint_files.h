// Finds what a checkpoint directory holds: which weight files (one
// model.safetensors, or shards named by model.safetensors.index.json) and
// which side files. Refuses pickle-only checkpoints.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loader/model_config.h"
#include "loader/shard_index.h"

namespace placer::loader {

struct CheckpointFiles {
  std::string dir;
  std::string config_path;
  // Bare file names of the weight files, in a stable order.
  std::vector<std::string> shard_names;
  // Present when the checkpoint is sharded.
  std::optional<ShardIndex> index;
  std::string index_path;
  // Side files; absent ones stay empty.
  std::string generation_config_path;
  std::string tokenizer_path;
  std::string tokenizer_config_path;
  std::string quantize_config_path;  // AutoGPTQ's, for checkpoints whose config.json lacks one
};

absl::StatusOr<CheckpointFiles> FindCheckpointFiles(const std::string& dir);

// config.json, with quantize_config.json's format when config.json has no
// quantization_config. Both the loader and the planner read the config through this.
absl::StatusOr<ModelConfig> ReadCheckpointConfig(const CheckpointFiles& files);

}  // namespace placer::loader
