#include "placement/device_map.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "loader/file_util.h"
#include "base/status_macros.h"

namespace placer::placement {

DeviceMap CompactDeviceMap(const ModuleTree& tree, const std::vector<Device>& tensor_devices) {
  const auto& modules = tree.modules();
  // A child module is created after its parent, so walking indices backwards
  // sees every child before its parent.
  std::vector<std::optional<Device>> uniform(modules.size());
  std::vector<bool> mixed(modules.size(), false);
  for (int m = static_cast<int>(modules.size()) - 1; m >= 0; --m) {
    for (const ModuleTree::Item& item : modules[m].items) {
      std::optional<Device> device;
      if (item.is_module) {
        if (mixed[item.index]) {
          mixed[m] = true;
          break;
        }
        device = uniform[item.index];
      } else {
        device = tensor_devices[item.index];
      }
      if (!uniform[m]) {
        uniform[m] = device;
      } else if (*uniform[m] != *device) {
        mixed[m] = true;
        break;
      }
    }
  }
  DeviceMap map;
  // Non-negative entries are modules, negative ones tensor -1 - t.
  std::vector<int> stack = {0};
  while (!stack.empty()) {
    const int entry = stack.back();
    stack.pop_back();
    if (entry < 0) {
      const int t = -1 - entry;
      map.emplace_back(tree.tensors()[t].name, tensor_devices[t]);
      continue;
    }
    if (!mixed[entry]) {
      map.emplace_back(modules[entry].name, *uniform[entry]);
      continue;
    }
    const auto& items = modules[entry].items;
    for (auto it = items.rbegin(); it != items.rend(); ++it) {
      stack.push_back(it->is_module ? it->index : -1 - it->index);
    }
  }
  return map;
}

nlohmann::ordered_json DeviceMapToJson(const DeviceMap& map) {
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  for (const auto& [name, device] : map) json[name] = DeviceToHfJson(device);
  return json;
}

absl::StatusOr<DeviceMap> ParseDeviceMapJson(absl::string_view json_text,
                                             absl::string_view file) {
  nlohmann::ordered_json json = nlohmann::ordered_json::parse(
      json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": not valid JSON"));
  }
  if (!json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": a device map is a JSON object of module name -> device"));
  }
  DeviceMap map;
  for (auto it = json.begin(); it != json.end(); ++it) {
    absl::StatusOr<Device> device = DeviceFromHfJson(nlohmann::json(it.value()));
    if (!device.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": module '", it.key(), "': ",
                                                     device.status().message()));
    }
    map.emplace_back(it.key(), *device);
  }
  return map;
}

absl::StatusOr<DeviceMap> ReadDeviceMapFile(const std::string& path) {
  PLACER_ASSIGN_OR_RETURN(std::string text, loader::ReadSmallFile(path, 64ull << 20));
  return ParseDeviceMapJson(text, path);
}

}  // namespace placer::placement
