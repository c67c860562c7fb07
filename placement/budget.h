// How many bytes each device may hold (DESIGN.md "budget"): the user's
// --max-memory when given, else a fraction of what is free. Reserves (KV
// cache, activations, staging) come off this limit later, in the planner.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/device.h"
#include "placement/device_inventory.h"

namespace placer::placement {

struct BudgetOptions {
  // From --max-memory. As in Accelerate, a memory device (GPU or cpu) that
  // is not listed gets nothing; disk keeps its free space unless listed.
  std::optional<std::map<Device, std::uint64_t>> max_memory;
  // Used for GPUs when max_memory is unset (--gpu-memory-utilization).
  double gpu_memory_utilization = 0.90;
};

struct DeviceBudget {
  DeviceInfo info;
  std::uint64_t limit_bytes = 0;  // weights + reserves must stay below this
  std::string source;             // how limit_bytes was chosen, for reports
};

// Host memory kept back for the OS, the daemon's own heap and page cache
// that mmap loading needs: 10% of MemAvailable, at least 1 GiB, never more
// than what is available.
std::uint64_t CpuSafetyMargin(std::uint64_t available_bytes);

// One budget per device, in the inventory's order. --max-memory entries for
// devices the inventory lacks are errors naming the entry.
absl::StatusOr<std::vector<DeviceBudget>> ComputeBudgets(
    const std::vector<DeviceInfo>& devices, const BudgetOptions& options);

}  // namespace placer::placement
