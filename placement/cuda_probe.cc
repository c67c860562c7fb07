#include "placement/cuda_probe.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#if PLACER_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace placer::placement {

bool BuiltWithCuda() { return PLACER_WITH_CUDA != 0; }

GpuProbe CudaGpuProbe() {
  return []() -> absl::StatusOr<std::vector<GpuMemoryInfo>> {
    std::vector<GpuMemoryInfo> gpus;
#if PLACER_WITH_CUDA
    int count = 0;
    // No driver or no device is not an error: the machine simply has no GPU to plan on.
    if (cudaGetDeviceCount(&count) != cudaSuccess) return gpus;
    for (int index = 0; index < count; ++index) {
      cudaDeviceProp properties{};
      size_t free_bytes = 0, total_bytes = 0;
      if (cudaSetDevice(index) != cudaSuccess ||
          cudaGetDeviceProperties(&properties, index) != cudaSuccess ||
          cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
        return absl::UnavailableError(
            absl::StrCat("cuda:", index, ": cannot read memory: ",
                         cudaGetErrorString(cudaGetLastError())));
      }
      gpus.push_back(GpuMemoryInfo{properties.name, total_bytes, free_bytes});
    }
#endif
    return gpus;
  };
}

absl::StatusOr<std::vector<CudaGpuMemory>> ReadCudaGpuMemory() {
  std::vector<CudaGpuMemory> gpus;
#if PLACER_WITH_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return gpus;
  for (int index = 0; index < count; ++index) {
    cudaDeviceProp properties{};
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaSetDevice(index) != cudaSuccess ||
        cudaGetDeviceProperties(&properties, index) != cudaSuccess ||
        cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
      return absl::UnavailableError(absl::StrCat("cuda:", index, ": cannot read memory: ",
                                                 cudaGetErrorString(cudaGetLastError())));
    }
    const auto* b = reinterpret_cast<const unsigned char*>(properties.uuid.bytes);
    gpus.push_back(CudaGpuMemory{
        absl::StrFormat("GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                        b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                        b[12], b[13], b[14], b[15]),
        total_bytes, free_bytes});
  }
#endif
  return gpus;
}

}  // namespace placer::placement
