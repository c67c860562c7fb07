#include "loader/shard_index.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/json_fields.h"
#include "base/status_macros.h"

namespace placer::loader {
namespace {

using nlohmann::json;

absl::Status Bad(absl::string_view file, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": ", what));
}

bool IsPlainShardName(absl::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find('/') == absl::string_view::npos &&
         name.find('\\') == absl::string_view::npos &&
         name.find('\0') == absl::string_view::npos &&
         absl::EndsWith(name, ".safetensors");
}

}  // namespace

std::set<std::string> ShardIndex::ShardFiles() const {
  std::set<std::string> files;
  for (const auto& [tensor, file] : weight_map) files.insert(file);
  return files;
}

absl::StatusOr<ShardIndex> ParseShardIndex(absl::string_view json_text,
                                           absl::string_view file) {
  json parsed;
  try {
    parsed = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& e) {
    return Bad(file, absl::StrCat("not valid JSON: ", e.what()));
  }
  const JsonWhere top{file, ""};
  ShardIndex index;
  PLACER_ASSIGN_OR_RETURN(const json* metadata, FindJsonField(parsed, top, "metadata"));
  if (metadata != nullptr) {
    // Reading a field of it checks that it is an object.
    PLACER_ASSIGN_OR_RETURN(const std::int64_t total_size,
                            ReadIntField(*metadata, {file, "metadata"}, "total_size", 0));
    index.metadata = *metadata;
    if (total_size < 0) return Bad(file, "metadata.total_size: must not be negative");
    index.total_size = static_cast<std::uint64_t>(total_size);
  }
  PLACER_ASSIGN_OR_RETURN(const json* weight_map, ReadObjectField(parsed, top, "weight_map"));
  if (weight_map->empty()) return Bad(file, "weight_map: lists no tensors");
  for (const auto& [tensor, shard] : weight_map->items()) {
    if (tensor.empty()) return Bad(file, "weight_map: has an empty tensor name");
    // Tensor names hold dots: the key is quoted in the path.
    const std::string path = absl::StrCat("weight_map.\"", tensor, "\"");
    PLACER_ASSIGN_OR_RETURN(std::string shard_name, JsonAsString(shard, {file, path}));
    if (!IsPlainShardName(shard_name)) {
      return JsonError({file, path}, absl::StrCat("names \"", shard_name,
                                                  "\": shards must be plain *.safetensors file "
                                                  "names inside the checkpoint directory"));
    }
    index.weight_map.emplace(tensor, std::move(shard_name));
  }
  return index;
}

}  // namespace placer::loader
