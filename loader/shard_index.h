// model.safetensors.index.json: which shard file holds each tensor.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include "absl/strings/string_view.h"

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace placer::loader {

inline constexpr absl::string_view kShardIndexFileName = "model.safetensors.index.json";
inline constexpr absl::string_view kSingleFileName = "model.safetensors";

struct ShardIndex {
  // tensor name -> shard file name (a bare file name in the checkpoint dir).
  std::map<std::string, std::string> weight_map;
  // metadata.total_size when present.
  std::optional<std::uint64_t> total_size;
  nlohmann::json metadata = nlohmann::json::object();

  std::set<std::string> ShardFiles() const;
};

// Shard names must be plain file names ending in ".safetensors": an index may
// not point outside its directory.
absl::StatusOr<ShardIndex> ParseShardIndex(absl::string_view json_text,
                                           absl::string_view file);

}  // namespace placer::loader
