#include "placement/checkpoint_tensors.h"

#include "loader/checkpoint_files.h"
#include "loader/file_util.h"
#include "loader/safetensors_header.h"
#include "base/status_macros.h"

namespace placer::placement {

absl::StatusOr<CheckpointSummary> ReadCheckpointSummary(const std::string& dir) {
  // The same files the loader opens (one discovery: loader/checkpoint_files.h).
  PLACER_ASSIGN_OR_RETURN(loader::CheckpointFiles files, loader::FindCheckpointFiles(dir));
  CheckpointSummary summary;
  absl::StatusOr<loader::ModelConfig> config = loader::ReadCheckpointConfig(files);
  if (!config.ok()) return config.status();
  summary.config = *std::move(config);

  std::vector<std::string> shards;
  for (const std::string& name : files.shard_names) shards.push_back(dir + "/" + name);
  for (const std::string& shard : shards) {
    PLACER_ASSIGN_OR_RETURN(loader::SafetensorsHeader header, loader::ReadSafetensorsHeader(shard));
    for (const auto& [name, entry] : header.tensors) {
      summary.tensors.push_back({name, entry.shape, entry.dtype, false});
    }
  }
  return summary;
}

}  // namespace placer::placement
