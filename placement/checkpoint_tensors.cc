#include "placement/checkpoint_tensors.h"

#include "absl/strings/str_cat.h"
#include "loader/file_util.h"
#include "loader/safetensors_header.h"
#include "loader/shard_index.h"

namespace placer::placement {

absl::StatusOr<CheckpointSummary> ReadCheckpointSummary(const std::string& dir) {
  CheckpointSummary summary;
  const std::string config_path = dir + "/config.json";
  absl::StatusOr<std::string> config_text = loader::ReadSmallFile(config_path);
  if (!config_text.ok()) return config_text.status();
  absl::StatusOr<loader::ModelConfig> config = loader::ParseModelConfig(*config_text, config_path);
  if (!config.ok()) return config.status();
  summary.config = *std::move(config);

  std::vector<std::string> shards;
  const std::string index_path = absl::StrCat(dir, "/", loader::kShardIndexFileName);
  if (loader::FileSize(index_path).ok()) {
    absl::StatusOr<std::string> index_text = loader::ReadSmallFile(index_path);
    if (!index_text.ok()) return index_text.status();
    absl::StatusOr<loader::ShardIndex> index = loader::ParseShardIndex(*index_text, index_path);
    if (!index.ok()) return index.status();
    for (const std::string& shard : index->ShardFiles()) shards.push_back(dir + "/" + shard);
  } else {
    const std::string single = absl::StrCat(dir, "/", loader::kSingleFileName);
    if (!loader::FileSize(single).ok()) {
      return absl::NotFoundError(absl::StrCat(
          dir, ": no ", loader::kSingleFileName, " and no ", loader::kShardIndexFileName,
          " (only safetensors checkpoints are supported)"));
    }
    shards.push_back(single);
  }
  for (const std::string& shard : shards) {
    absl::StatusOr<loader::SafetensorsHeader> header = loader::ReadSafetensorsHeader(shard);
    if (!header.ok()) return header.status();
    for (const auto& [name, entry] : header->tensors) {
      summary.tensors.push_back({name, entry.shape, entry.dtype, false});
    }
  }
  return summary;
}

}  // namespace placer::placement
