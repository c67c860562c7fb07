#include "placement/module_subtree.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace placer::placement {

absl::StatusOr<ModuleTreeSpec> SubtreeSpec(const ModuleTreeSpec& spec,
                                           const std::vector<std::string>& modules) {
  auto inside = [&](const std::string& name) {
    return std::any_of(modules.begin(), modules.end(),
                       [&](const std::string& module) { return IsDottedPrefix(module, name); });
  };
  ModuleTreeSpec out;
  out.no_split_classes = spec.no_split_classes;
  std::set<std::string> kept;
  for (const TensorSpec& tensor : spec.tensors) {
    if (!inside(tensor.name)) continue;
    out.tensors.push_back(tensor);
    kept.insert(tensor.name);
  }
  if (out.tensors.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a stage of modules [", absl::StrJoin(modules, ", "), "] holds no tensor"));
  }
  for (const auto& [name, class_name] : spec.module_classes) {
    if (inside(name)) out.module_classes.emplace(name, class_name);
  }
  for (const auto& [name, bytes] : spec.kv_cache_bytes) {
    if (inside(name)) out.kv_cache_bytes.emplace(name, bytes);
  }
  for (const std::vector<std::string>& group : spec.tied) {
    const auto here = std::count_if(group.begin(), group.end(),
                                    [&](const std::string& name) { return kept.count(name) != 0; });
    if (here == 0) continue;
    if (static_cast<size_t>(here) != group.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tied tensors [", absl::StrJoin(group, ", "), "] would be split between stages"));
    }
    out.tied.push_back(group);
  }
  return out;
}

}  // namespace placer::placement
