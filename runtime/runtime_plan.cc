#include "runtime/runtime_plan.h"

#include "absl/strings/str_cat.h"

namespace placer::runtime {

RuntimePlan RuntimePlan::AllOnCpu() {
  RuntimePlan plan;
  plan.device_map = {{"", Device::Cpu()}};
  return plan;
}

RuntimePlan RuntimePlan::FromPlan(const placement::Plan& plan) {
  RuntimePlan runtime;
  runtime.device_map = plan.device_map;
  runtime.execution_device = plan.execution_device;
  runtime.virtual_gpus = plan.sizing.virtual_gpus;
  runtime.prefetch = plan.sizing.prefetch;
  if (plan.offload_staged) runtime.staging_slots = plan.staging_slots;
  runtime.offload_dir = plan.sizing.offload_dir;
  runtime.quantize = plan.sizing.quantize;
  runtime.other_stage_blocks = plan.other_stage_blocks;
  return runtime;
}

absl::StatusOr<Device> RuntimePlan::DeviceOf(const std::string& tensor_name) const {
  const std::pair<std::string, Device>* best = nullptr;
  for (const auto& entry : device_map) {
    const std::string& module = entry.first;
    const bool covers =
        module.empty() || tensor_name == module ||
        (tensor_name.size() > module.size() && tensor_name.compare(0, module.size(), module) == 0 &&
         tensor_name[module.size()] == '.');
    if (covers && (best == nullptr || module.size() > best->first.size())) best = &entry;
  }
  if (best == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("device map: no entry covers tensor ", tensor_name));
  }
  return best->second;
}

}  // namespace placer::runtime
