#include "loader/checkpoint.h"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "loader/checkpoint_files.h"
#include "loader/file_util.h"
#include "loader/architectures/architecture.h"
#include "loader/prequantized_tensors.h"
#include "loader/safetensors_header.h"
#include "base/status_macros.h"

namespace placer::loader {
namespace {

std::string ShapeString(const std::vector<std::int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// `skipped_top_level_keys`: members of the top object dropped while parsing (never built).
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path,
                                            const std::vector<std::string>& skipped_top_level_keys = {}) {
  PLACER_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path));
  try {
    if (skipped_top_level_keys.empty()) return nlohmann::json::parse(text);
    const nlohmann::json::parser_callback_t skip = [&](int depth, nlohmann::json::parse_event_t event,
                                                       nlohmann::json& parsed) {
      if (depth != 1 || event != nlohmann::json::parse_event_t::key) return true;
      return std::find(skipped_top_level_keys.begin(), skipped_top_level_keys.end(),
                       parsed.get_ref<const std::string&>()) == skipped_top_level_keys.end();
    };
    return nlohmann::json::parse(text, skip);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON: ", e.what()));
  }
}

absl::StatusOr<std::optional<nlohmann::json>> ReadOptionalJsonObject(
    const std::string& path, const std::vector<std::string>& skipped_top_level_keys = {}) {
  if (path.empty()) return std::optional<nlohmann::json>();
  PLACER_ASSIGN_OR_RETURN(nlohmann::json parsed, ReadJsonFile(path, skipped_top_level_keys));
  if (!parsed.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": must be a JSON object"));
  }
  return std::optional<nlohmann::json>(std::move(parsed));
}

}  // namespace

absl::StatusOr<std::shared_ptr<Checkpoint>> Checkpoint::Open(const std::string& dir) {
  PLACER_ASSIGN_OR_RETURN(CheckpointFiles files, FindCheckpointFiles(dir));

  std::shared_ptr<Checkpoint> checkpoint(new Checkpoint());
  checkpoint->dir_ = dir;
  {
    PLACER_ASSIGN_OR_RETURN(ModelConfig config, ReadCheckpointConfig(files));
    checkpoint->config_ = std::move(config);
  }
  const ModelConfig& config = checkpoint->config_;
  const ArchitectureDescription architecture = DescribeArchitecture(config);

  // Headers: every tensor once, in the shard the index says.
  std::map<std::string, std::string> file_of_tensor;
  for (const std::string& shard_name : files.shard_names) {
    const std::string path = absl::StrCat(dir, "/", shard_name);
    PLACER_ASSIGN_OR_RETURN(std::shared_ptr<SafetensorsFile> file, SafetensorsFile::Open(path));
    const SafetensorsHeader& header = file->header();
    const int shard = static_cast<int>(checkpoint->shards_.size());
    checkpoint->shards_.push_back(ShardInfo{path, header.file_size, file->mtime_ns(),
                                            header.header_fnv1a64, header.metadata});
    checkpoint->files_.push_back(file);

    for (const auto& [stored_name, entry] : header.tensors) {
      if (files.index) {
        const auto listed = files.index->weight_map.find(stored_name);
        if (listed == files.index->weight_map.end()) {
          return absl::InvalidArgumentError(absl::StrCat(
              path, ": tensor \"", stored_name, "\" is not listed in ", files.index_path));
        }
        if (listed->second != shard_name) {
          return absl::InvalidArgumentError(absl::StrCat(
              path, ": tensor \"", stored_name, "\" is listed in ", files.index_path,
              " as being in ", listed->second));
        }
      }
      const std::string name = architecture.CanonicalName(stored_name);
      if (const auto [it, inserted] = file_of_tensor.emplace(name, path); !inserted) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tensor \"", name, "\" appears twice: in ", it->second, " and in ", path));
      }
      TensorInfo info;
      info.name = name;
      info.stored_name = stored_name;
      info.shard = shard;
      info.dtype = entry.dtype;
      info.shape = entry.shape;
      info.num_elements = static_cast<std::int64_t>(entry.num_elements);
      info.begin = entry.begin;
      info.end = entry.end;
      checkpoint->tensors_.emplace(name, std::move(info));
    }
  }
  if (files.index) {
    for (const auto& [stored_name, shard_name] : files.index->weight_map) {
      if (file_of_tensor.count(architecture.CanonicalName(stored_name)) == 0) {
        return absl::NotFoundError(absl::StrCat(
            files.index_path, ": tensor \"", stored_name, "\" is listed in shard ",
            shard_name, " but absent from it"));
      }
    }
  }

  // Names and shapes must be what config.json implies for the architecture. A tied tensor
  // stored anyway (lm_head.weight of a tied model) is ignored, as transformers ties it, but
  // it must still have the shape it stands for.
  if (config.quantization) {
    std::map<std::string, StoredTensor> stored;
    for (const auto& [name, info] : checkpoint->tensors_) stored[name] = {info.dtype, info.shape};
    PLACER_ASSIGN_OR_RETURN(
        checkpoint->quantized_,
        MatchQuantizedLinears(architecture, *config.quantization,
                              [&stored](const std::string& name) -> const StoredTensor* {
                                const auto it = stored.find(name);
                                return it == stored.end() ? nullptr : &it->second;
                              },
                              dir));
  }
  std::map<std::string, const TensorDescription*> slot_of;
  for (const TensorDescription* slot : architecture.Slots()) {
    if (checkpoint->QuantizedLinear(slot->name) != nullptr) continue;
    slot_of.emplace(slot->name, slot);
    const TensorInfo* info = checkpoint->Find(slot->name);
    if (info == nullptr && slot->present && slot->tied_to.empty()) {
      const std::string why_float = config.quantization && slot->linear != LinearWeight::kNone
                                        ? config.quantization->WhyFloat(ModuleOf(slot->name))
                                        : "";
      return absl::NotFoundError(absl::StrCat(
          dir, ": tensor \"", slot->name, "\" is missing; config.json (",
          ArchitectureName(config.architecture), ") requires it",
          why_float.empty() ? "" : absl::StrCat(" unquantized (", why_float, ")")));
    }
    if (info != nullptr && slot->present && info->shape != slot->shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          checkpoint->shards_[static_cast<std::size_t>(info->shard)].path, ": tensor \"",
          slot->name, "\" has shape ", ShapeString(info->shape), " but config.json implies ",
          ShapeString(slot->shape)));
    }
  }
  std::map<DType, std::uint64_t> bytes_by_dtype;
  for (const auto& [name, info] : checkpoint->tensors_) {
    const std::string& path = checkpoint->shards_[static_cast<std::size_t>(info.shard)].path;
    const bool buffer = architecture.IsNonParameterBuffer(name);
    if (checkpoint->quantized_.parts.count(name) > 0) {
      checkpoint->total_bytes_ += info.nbytes();
      continue;
    }
    const auto slot = slot_of.find(name);
    if (!buffer && slot == slot_of.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor \"", name, "\" is not part of ", ArchitectureName(config.architecture),
          " as config.json describes it"));
    }
    if (!buffer && !slot->second->present) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor \"", name, "\" is in the checkpoint but config.json (",
          ArchitectureName(config.architecture),
          ") leaves it out: set the flag that adds it (attention_bias, mlp_bias) or drop it"));
    }
    checkpoint->total_bytes_ += info.nbytes();
    if (!buffer) checkpoint->parameter_count_ += info.num_elements;
    if (IsFloatingDType(info.dtype)) bytes_by_dtype[info.dtype] += info.nbytes();
  }
  // A quantized linear weight counts its out × in parameters, as transformers counts them.
  for (const auto& [slot, source] : checkpoint->quantized_.by_slot) {
    checkpoint->parameter_count_ += source.layout.out * source.layout.in;
  }
  std::uint64_t most_bytes = 0;
  for (const auto& [dtype, bytes] : bytes_by_dtype) {
    if (bytes >= most_bytes) {
      most_bytes = bytes;
      checkpoint->dtype_ = dtype;
    }
  }

  if (!files.generation_config_path.empty()) {
    PLACER_ASSIGN_OR_RETURN(std::optional<nlohmann::json> generation,
                            ReadOptionalJsonObject(files.generation_config_path));
    checkpoint->generation_config_ = *generation;
    checkpoint->has_generation_config_ = true;
  }
  PLACER_ASSIGN_OR_RETURN(std::optional<nlohmann::json> tokenizer,
                          ReadOptionalJsonObject(files.tokenizer_path));
  checkpoint->tokenizer_ = std::move(tokenizer);
  // The added tokens come from tokenizer.json; tokenizer_config.json's copy of them
  // (`added_tokens_decoder`, one object per token) is never read, so never built.
  PLACER_ASSIGN_OR_RETURN(std::optional<nlohmann::json> tokenizer_config,
                          ReadOptionalJsonObject(files.tokenizer_config_path, {"added_tokens_decoder"}));
  checkpoint->tokenizer_config_ = std::move(tokenizer_config);
  return checkpoint;
}

void Checkpoint::ReleaseTokenizerFiles() {
  if (tokenizer_) tokenizer_ = nlohmann::json::object();
  if (tokenizer_config_) tokenizer_config_ = nlohmann::json::object();
}

absl::StatusOr<at::Tensor> Checkpoint::ReadTensor(absl::string_view name) const {
  const TensorInfo* info = Find(name);
  if (info == nullptr) {
    return absl::NotFoundError(absl::StrCat(dir_, ": no tensor \"", name, "\""));
  }
  return files_[static_cast<std::size_t>(info->shard)]->Read(info->stored_name);
}

absl::StatusOr<at::Tensor> Checkpoint::ReadTensor(absl::string_view name, at::ScalarType dtype,
                                                  at::Device device) const {
  const TensorInfo* info = Find(name);
  if (info == nullptr) {
    return absl::NotFoundError(absl::StrCat(dir_, ": no tensor \"", name, "\""));
  }
  return files_[static_cast<std::size_t>(info->shard)]->Read(info->stored_name, dtype, device);
}

std::size_t Checkpoint::mapped_shard_count() const {
  std::size_t count = 0;
  for (const auto& file : files_) count += file->mapped() ? 1 : 0;
  return count;
}

const QuantizedLinearSource* Checkpoint::QuantizedLinear(absl::string_view slot) const {
  const auto it = quantized_.by_slot.find(std::string(slot));
  return it == quantized_.by_slot.end() ? nullptr : &it->second;
}

const TensorInfo* Checkpoint::Find(absl::string_view name) const {
  const auto it = tensors_.find(std::string(name));
  return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace placer::loader
