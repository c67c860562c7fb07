// The GPU probe the daemon plans with: device count, name, total and free memory of every
// CUDA device. Built against the CUDA runtime only when libtorch has CUDA; otherwise it
// reports no GPU, and placement falls back to cpu and disk.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/device_inventory.h"

namespace placer::placement {

GpuProbe CudaGpuProbe();

// Whether this build can see CUDA devices at all.
bool BuiltWithCuda();

// A CUDA device as NVIDIA's tools name it, with its memory now (whoever holds it).
struct CudaGpuMemory {
  std::string uuid;  // "GPU-5c1d3ad4-...", as nvidia-smi and Triton's gpu_uuid label write it
  std::uint64_t total_bytes = 0;
  std::uint64_t free_bytes = 0;
};

// Every visible CUDA device in ordinal order; empty in a build without CUDA or on a machine
// without a GPU.
absl::StatusOr<std::vector<CudaGpuMemory>> ReadCudaGpuMemory();

}  // namespace placer::placement
