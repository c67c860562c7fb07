// Device maps in Hugging Face's JSON form: {"model.layers.0": 0,
// "lm_head": "cpu", "model.norm": "disk"}, GPUs written as integers exactly
// as transformers' hf_device_map, so maps move between the two tools.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/device.h"
#include "placement/module_tree.h"

namespace placer::placement {

// Module (or tensor) name -> device, in execution order.
using DeviceMap = std::vector<std::pair<std::string, Device>>;

// The coarsest map: a module whose tensors all share a device is one entry
// (the whole model on one device is {"": device}, as in Accelerate).
DeviceMap CompactDeviceMap(const ModuleTree& tree, const std::vector<Device>& tensor_devices);

nlohmann::ordered_json DeviceMapToJson(const DeviceMap& map);

// Accepts a JSON object of name -> device (integer N, "cuda:N", "cpu",
// "disk"). Keys keep the file's order; `file` names the source in errors.
absl::StatusOr<DeviceMap> ParseDeviceMapJson(absl::string_view json_text,
                                             absl::string_view file);

absl::StatusOr<DeviceMap> ReadDeviceMapFile(const std::string& path);

}  // namespace placer::placement
