#include "placement/device_roles.h"

#include "absl/strings/str_cat.h"

namespace placer::placement {
namespace {

int CpuIndex(const std::vector<DeviceBudget>& budgets) {
  for (int d = 0; d < static_cast<int>(budgets.size()); ++d) {
    if (budgets[d].info.device.kind == DeviceKind::kCpu) return d;
  }
  return -1;
}

bool UsableGpu(const DeviceBudget& budget) {
  return budget.info.device.is_gpu() && budget.limit_bytes > 0;
}

}  // namespace

absl::StatusOr<OffloadExec> ParseOffloadExec(absl::string_view text) {
  if (text == "auto") return OffloadExec::kAuto;
  if (text == "gpu") return OffloadExec::kGpu;
  if (text == "cpu") return OffloadExec::kCpu;
  return absl::InvalidArgumentError(
      absl::StrCat("--offload-exec '", text, "': expected auto, gpu or cpu"));
}

absl::string_view OffloadExecName(OffloadExec mode) {
  switch (mode) {
    case OffloadExec::kAuto: return "auto";
    case OffloadExec::kGpu: return "gpu";
    case OffloadExec::kCpu: return "cpu";
  }
  return "auto";
}

std::string ExecutionChoice::Describe(const std::vector<DeviceBudget>& budgets) const {
  const std::string device =
      execution >= 0 ? budgets[execution].info.device.Name() : std::string("no device");
  if (!staged) return absl::StrCat("run on ", device, " where their weights live");
  return absl::StrCat("staged onto ", device, " through ",
                      staging_slots == 2 ? "two slots (the next block is copied in while one "
                                           "computes)"
                                         : "one slot (each block copied in when entered: "
                                           "no prefetch)");
}

std::vector<ExecutionChoice> ExecutionChoices(const std::vector<DeviceBudget>& budgets,
                                              OffloadExec mode, bool prefetch) {
  std::vector<int> gpus;
  for (int d = 0; d < static_cast<int>(budgets.size()); ++d) {
    if (UsableGpu(budgets[d])) gpus.push_back(d);
  }
  const int cpu = CpuIndex(budgets);
  std::vector<ExecutionChoice> choices;
  if (gpus.empty() || mode == OffloadExec::kCpu) {
    if (cpu >= 0) choices.push_back({cpu, 2, false});
    return choices;
  }
  for (int slots : {2, 1}) {
    if (slots == 2 && !prefetch) continue;
    for (int gpu : gpus) choices.push_back({gpu, slots, true});
  }
  if (mode == OffloadExec::kAuto && cpu >= 0) choices.push_back({cpu, 2, false});
  return choices;
}

DeviceRoles AssignDeviceRoles(const std::vector<DeviceBudget>& budgets,
                              const ExecutionChoice& choice) {
  DeviceRoles roles;
  roles.execution = choice.execution;
  roles.staging_slots = choice.staging_slots;
  roles.runs_blocks.assign(budgets.size(), false);
  for (int d = 0; d < static_cast<int>(budgets.size()); ++d) {
    if (UsableGpu(budgets[d])) {
      roles.runs_blocks[d] = true;
      roles.has_gpu = true;
    }
  }
  if (choice.execution >= 0) roles.runs_blocks[choice.execution] = true;
  return roles;
}

Device BlockExecutionDevice(const Device& weights, bool row_lookup,
                            const Device& offload_execution) {
  if (weights.is_gpu()) return weights;
  if (offload_execution.is_gpu() && !row_lookup) return offload_execution;
  return Device::Cpu();
}

}  // namespace placer::placement
