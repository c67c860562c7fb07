#include "placement/budget.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "placement/byte_size.h"

namespace placer::placement {

std::uint64_t CpuSafetyMargin(std::uint64_t available_bytes) {
  const std::uint64_t margin = std::max<std::uint64_t>(1ull << 30, available_bytes / 10);
  return std::min(margin, available_bytes);
}

absl::StatusOr<std::vector<DeviceBudget>> ComputeBudgets(
    const std::vector<DeviceInfo>& devices, const BudgetOptions& options) {
  if (!(options.gpu_memory_utilization > 0.0 && options.gpu_memory_utilization <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--gpu-memory-utilization %g: must be in (0, 1]", options.gpu_memory_utilization));
  }
  if (options.max_memory) {
    for (const auto& [device, bytes] : *options.max_memory) {
      const bool known = std::any_of(devices.begin(), devices.end(),
                                     [&](const DeviceInfo& d) { return d.device == device; });
      if (!known) {
        std::vector<std::string> names;
        for (const DeviceInfo& d : devices) names.push_back(d.device.Name());
        return absl::InvalidArgumentError(absl::StrCat(
            "--max-memory entry for ", device.Name(), ": no such device (devices: ",
            absl::StrJoin(names, ", "),
            device.kind == DeviceKind::kDisk ? "; set --offload-dir to use disk" : "", ")"));
      }
    }
  }

  std::vector<DeviceBudget> budgets;
  for (const DeviceInfo& info : devices) {
    DeviceBudget budget{info, 0, ""};
    if (options.max_memory) {
      auto it = options.max_memory->find(info.device);
      if (it != options.max_memory->end()) {
        budget.limit_bytes = it->second;
        budget.source = absl::StrCat("--max-memory ", FormatBytes(it->second));
        budgets.push_back(budget);
        continue;
      }
      if (info.device.kind != DeviceKind::kDisk) {
        budget.source = "not listed in --max-memory";
        budgets.push_back(budget);
        continue;
      }
    }
    switch (info.device.kind) {
      case DeviceKind::kCuda:
        budget.limit_bytes = static_cast<std::uint64_t>(std::floor(
            static_cast<double>(info.free_bytes) * options.gpu_memory_utilization));
        budget.source = absl::StrFormat("%.2f x free %s", options.gpu_memory_utilization,
                                        FormatBytes(info.free_bytes));
        break;
      case DeviceKind::kCpu: {
        // A virtual cpu size is what the user grants placer; the margin protects the rest of
        // a real machine's MemAvailable, which a stated size has already left out.
        const std::uint64_t margin = info.is_virtual ? 0 : CpuSafetyMargin(info.free_bytes);
        budget.limit_bytes = info.free_bytes - margin;
        budget.source = absl::StrCat("available ", FormatBytes(info.free_bytes), " less ",
                                     FormatBytes(margin), " safety margin");
        break;
      }
      case DeviceKind::kDisk:
        budget.limit_bytes = info.free_bytes;
        budget.source = absl::StrCat("free space ", FormatBytes(info.free_bytes));
        break;
    }
    budgets.push_back(budget);
  }
  return budgets;
}

}  // namespace placer::placement
