// Which devices this machine has and how much memory each has free: GPUs
// through a probe the daemon supplies (libtorch stays out of this library),
// cpu from /proc/meminfo, disk from statvfs on the offload directory. The
// --devices flag replaces probing with virtual devices (DESIGN.md).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/device.h"
#include "placement/memory_flags.h"

namespace placer::placement {

struct GpuMemoryInfo {
  std::string name;  // "NVIDIA H100 80GB HBM3"
  std::uint64_t total_bytes = 0;
  std::uint64_t free_bytes = 0;
};

// Returns one entry per visible GPU, ordinal order. A build without CUDA
// passes no probe (an empty std::function), which means "no GPU".
using GpuProbe = std::function<absl::StatusOr<std::vector<GpuMemoryInfo>>()>;

struct DeviceInfo {
  Device device;
  std::string description;  // GPU name, "host memory", the offload dir
  std::uint64_t total_bytes = 0;
  std::uint64_t free_bytes = 0;
  bool is_virtual = false;
};

struct InventoryOptions {
  // Set: these devices replace the GPU probe (and cpu/disk when given).
  std::optional<VirtualDevices> virtual_devices;
  GpuProbe gpu_probe;
  // Empty: no disk device, nothing can be offloaded to disk.
  std::string offload_dir;
  std::string meminfo_path = "/proc/meminfo";
};

// GPUs in ordinal order, then cpu, then disk (when offload_dir is set).
absl::StatusOr<std::vector<DeviceInfo>> ProbeDevices(const InventoryOptions& options);

struct HostMemory {
  std::uint64_t total_bytes = 0;
  std::uint64_t available_bytes = 0;
};

// Parses the text of /proc/meminfo (MemTotal and MemAvailable, in kB).
absl::StatusOr<HostMemory> ParseMemInfo(absl::string_view text);

struct DiskSpace {
  std::uint64_t total_bytes = 0;
  std::uint64_t free_bytes = 0;  // available to unprivileged users
};

// statvfs on `dir`, or on its nearest existing parent when `dir` does not
// exist yet (the offload store creates it later).
absl::StatusOr<DiskSpace> ProbeDiskSpace(const std::string& dir);

}  // namespace placer::placement
