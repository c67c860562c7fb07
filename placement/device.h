// A device is cuda:N, cpu or disk (DESIGN.md "device"). Devices order by
// tier: every GPU is faster than cpu, which is faster than disk.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace placer::placement {

enum class DeviceKind { kCuda = 0, kCpu = 1, kDisk = 2 };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;  // GPU ordinal; 0 for cpu and disk

  static Device Cuda(int index) { return {DeviceKind::kCuda, index}; }
  static Device Cpu() { return {DeviceKind::kCpu, 0}; }
  static Device Disk() { return {DeviceKind::kDisk, 0}; }

  bool is_gpu() const { return kind == DeviceKind::kCuda; }
  // cpu and disk hold weights that are staged onto an execution device.
  bool is_offload() const { return kind != DeviceKind::kCuda; }

  // "cuda:1", "cpu", "disk".
  std::string Name() const;

  friend bool operator==(const Device& a, const Device& b) {
    return a.kind == b.kind && a.index == b.index;
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
  // Tier first (GPUs, cpu, disk), then GPU ordinal.
  friend bool operator<(const Device& a, const Device& b) {
    if (a.kind != b.kind) return a.kind < b.kind;
    return a.index < b.index;
  }
};

// Accepts "cuda:N", "cpu", "disk" and, as Accelerate's max_memory does, a
// bare GPU ordinal "N".
absl::StatusOr<Device> ParseDevice(absl::string_view text);

// Hugging Face device-map form: GPUs as the integer N, else "cpu" / "disk".
nlohmann::json DeviceToHfJson(const Device& device);

// Inverse of DeviceToHfJson; also accepts "cuda:N" and "N" strings.
absl::StatusOr<Device> DeviceFromHfJson(const nlohmann::json& value);

}  // namespace placer::placement
