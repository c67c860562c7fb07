// Seed inputs for the fuzz targets, made by the checkpoint writer (tiny
// Llama and GPT-2 checkpoints, single-file and sharded) plus hand-written
// configs of every supported architecture.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace placer::fuzz {

struct SeedCorpus {
  std::vector<std::string> safetensors_header;  // file paths
  std::vector<std::string> shard_index;
  std::vector<std::string> model_config;
  std::vector<std::string> quantize_config;  // GPTQ/AWQ quantize_config.json
};

// Writes the corpus under root/{safetensors_header,shard_index,model_config,quantize_config}/.
absl::StatusOr<SeedCorpus> WriteSeedCorpus(const std::string& root);

}  // namespace placer::fuzz
