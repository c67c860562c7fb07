#include "loader/checkpoint_files.h"

#include <filesystem>
#include <set>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "loader/file_util.h"
#include "base/status_macros.h"

namespace placer::loader {
namespace {

namespace fs = std::filesystem;

bool IsPickleFile(const std::string& name) {
  return absl::EndsWith(name, ".bin") || absl::EndsWith(name, ".pt") ||
         absl::EndsWith(name, ".pth") || absl::EndsWith(name, ".ckpt");
}

absl::Status PickleRefusal(const std::string& dir, const std::vector<std::string>& pickles) {
  return absl::FailedPreconditionError(absl::StrCat(
      dir, ": holds only pickle weights (", absl::StrJoin(pickles, ", "),
      "). placer refuses pickle checkpoints: unpickling can execute arbitrary "
      "code hidden in the file. Convert them to safetensors with Python, e.g.\n"
      "  python -c \"from transformers import AutoModelForCausalLM as M; "
      "d='", dir, "'; M.from_pretrained(d).save_pretrained(d, safe_serialization=True)\""));
}

}  // namespace

absl::StatusOr<CheckpointFiles> FindCheckpointFiles(const std::string& dir) {
  std::error_code error;
  const fs::file_status status = fs::status(dir, error);
  if (error || !fs::exists(status)) {
    return absl::NotFoundError(absl::StrCat(dir, ": checkpoint directory does not exist"));
  }
  if (!fs::is_directory(status)) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": is not a directory"));
  }
  std::set<std::string> names;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    names.insert(it->path().filename().string());
  }
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat(dir, ": cannot list directory: ", error.message()));
  }
  if (names.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": checkpoint directory is empty (expected config.json and "
             "model.safetensors, or shards with model.safetensors.index.json)"));
  }

  CheckpointFiles files;
  files.dir = dir;
  const auto path = [&](absl::string_view name) { return absl::StrCat(dir, "/", name); };

  std::vector<std::string> safetensors;
  std::vector<std::string> pickles;
  for (const std::string& name : names) {
    if (absl::EndsWith(name, ".safetensors")) safetensors.push_back(name);
    if (IsPickleFile(name)) pickles.push_back(name);
  }

  if (names.count(std::string(kShardIndexFileName)) != 0) {
    files.index_path = path(kShardIndexFileName);
    PLACER_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(files.index_path));
    absl::StatusOr<ShardIndex> index = ParseShardIndex(text, files.index_path);
    if (!index.ok()) return index.status();
    for (const std::string& shard : index->ShardFiles()) {
      if (names.count(shard) == 0) {
        std::string example;
        for (const auto& [tensor, file] : index->weight_map) {
          if (file == shard) { example = tensor; break; }
        }
        return absl::NotFoundError(absl::StrCat(
            files.index_path, ": shard \"", shard, "\" (holding tensor \"", example,
            "\" and others) is missing from the directory"));
      }
      files.shard_names.push_back(shard);
    }
    files.index = *std::move(index);
  } else if (names.count(std::string(kSingleFileName)) != 0) {
    files.shard_names.push_back(std::string(kSingleFileName));
  } else if (!safetensors.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": has ", absl::StrJoin(safetensors, ", "), " but neither ",
        kSingleFileName, " nor ", kShardIndexFileName, " saying which shards form the model"));
  } else if (!pickles.empty()) {
    return PickleRefusal(dir, pickles);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": no weights found (expected model.safetensors, or shards with "
             "model.safetensors.index.json)"));
  }

  if (names.count("config.json") == 0) {
    return absl::NotFoundError(absl::StrCat(dir, ": config.json is missing"));
  }
  files.config_path = path("config.json");
  if (names.count("generation_config.json")) {
    files.generation_config_path = path("generation_config.json");
  }
  if (names.count("tokenizer.json")) files.tokenizer_path = path("tokenizer.json");
  if (names.count("tokenizer_config.json")) {
    files.tokenizer_config_path = path("tokenizer_config.json");
  }
  if (names.count("quantize_config.json")) {
    files.quantize_config_path = path("quantize_config.json");
  }
  return files;
}

absl::StatusOr<ModelConfig> ReadCheckpointConfig(const CheckpointFiles& files) {
  PLACER_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(files.config_path));
  PLACER_ASSIGN_OR_RETURN(ModelConfig config, ParseModelConfig(text, files.config_path));
  // config.json's quantization_config wins, as transformers reads it first.
  if (!config.quantization && !files.quantize_config_path.empty()) {
    PLACER_ASSIGN_OR_RETURN(std::string quantize_text, ReadSmallFile(files.quantize_config_path));
    PLACER_ASSIGN_OR_RETURN(config.quantization,
                            ParseQuantizeConfigFile(quantize_text, files.quantize_config_path));
  }
  return config;
}

}  // namespace placer::loader
