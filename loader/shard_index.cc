#include "loader/shard_index.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

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
  if (!parsed.is_object()) return Bad(file, "must be a JSON object");
  ShardIndex index;
  if (const auto it = parsed.find("metadata"); it != parsed.end() && !it->is_null()) {
    if (!it->is_object()) return Bad(file, "\"metadata\" must be an object");
    index.metadata = *it;
    if (const auto total = it->find("total_size"); total != it->end()) {
      if (!total->is_number_integer() ||
          (total->is_number_integer() && !total->is_number_unsigned() &&
           total->get<std::int64_t>() < 0)) {
        return Bad(file, "\"metadata.total_size\" must be a non-negative integer");
      }
      index.total_size = total->get<std::uint64_t>();
    }
  }
  const auto map_it = parsed.find("weight_map");
  if (map_it == parsed.end()) return Bad(file, "\"weight_map\" is missing");
  if (!map_it->is_object()) return Bad(file, "\"weight_map\" must be an object");
  if (map_it->empty()) return Bad(file, "\"weight_map\" lists no tensors");
  for (const auto& [tensor, shard] : map_it->items()) {
    if (tensor.empty()) return Bad(file, "\"weight_map\" has an empty tensor name");
    if (!shard.is_string()) {
      return Bad(file, absl::StrCat("\"weight_map\".\"", tensor,
                                    "\" must be a shard file name string"));
    }
    std::string shard_name = shard.get<std::string>();
    if (!IsPlainShardName(shard_name)) {
      return Bad(file, absl::StrCat("\"weight_map\".\"", tensor, "\" names \"",
                                    shard_name,
                                    "\": shards must be plain *.safetensors file "
                                    "names inside the checkpoint directory"));
    }
    index.weight_map.emplace(tensor, std::move(shard_name));
  }
  return index;
}

}  // namespace placer::loader
