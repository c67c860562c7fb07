// The GPU probe the daemon plans with: device count, name, total and free memory of every
// CUDA device. Built against the CUDA runtime only when libtorch has CUDA; otherwise it
// reports no GPU, and placement falls back to cpu and disk.
#pragma once

#include "placement/device_inventory.h"

namespace placer::placement {

GpuProbe CudaGpuProbe();

// Whether this build can see CUDA devices at all.
bool BuiltWithCuda();

}  // namespace placer::placement
