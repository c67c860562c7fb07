// The two flags that speak in device=size lists:
//   --max-memory 0=20GiB,cuda:1=20GiB,cpu=64GiB   (Accelerate's max_memory)
//   --devices cuda:0=4GiB,cuda:1=4GiB,cpu=8GiB    (virtual devices, DESIGN.md)
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/device.h"

namespace placer::placement {

// device -> limit in bytes. Each entry is DEVICE=SIZE with DEVICE one of N,
// cuda:N, cpu, disk; a device may appear once. Errors name the entry.
absl::StatusOr<std::map<Device, std::uint64_t>> ParseMaxMemory(absl::string_view text);

struct VirtualDevices {
  // gpu_bytes[N] is the memory of virtual cuda:N; ordinals are 0..N-1.
  std::vector<std::uint64_t> gpu_bytes;
  // Unset: probe the host as usual.
  std::optional<std::uint64_t> cpu_bytes;
  std::optional<std::uint64_t> disk_bytes;
};

// cuda:N=SIZE entries (ordinals contiguous from 0), optional cpu=SIZE and
// disk=SIZE. An empty list and bare ordinals are refused: a virtual device
// list is written out in full so a CI log says what it simulated.
absl::StatusOr<VirtualDevices> ParseVirtualDevices(absl::string_view text);

}  // namespace placer::placement
