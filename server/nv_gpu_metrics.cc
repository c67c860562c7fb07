#include "server/nv_gpu_metrics.h"

#include "placement/cuda_probe.h"

namespace placer::server {

bool NvGpuMetrics::Available() {
  if (!placement::BuiltWithCuda()) return false;
  const auto gpus = placement::ReadCudaGpuMemory();
  return gpus.ok() && !gpus->empty();
}

std::vector<prometheus::MetricFamily> NvGpuMetrics::Collect() const {
  prometheus::MetricFamily total{"nv_gpu_memory_total_bytes",
                                 "GPU total memory, in bytes (as Triton exports it).",
                                 prometheus::MetricType::Gauge, {}};
  prometheus::MetricFamily used{"nv_gpu_memory_used_bytes",
                                "GPU used memory by all processes, in bytes (as Triton exports it).",
                                prometheus::MetricType::Gauge, {}};
  const auto gpus = placement::ReadCudaGpuMemory();
  if (gpus.ok()) {
    for (const placement::CudaGpuMemory& gpu : *gpus) {
      prometheus::ClientMetric metric;
      metric.label = {{"gpu_uuid", gpu.uuid}};
      metric.gauge.value = static_cast<double>(gpu.total_bytes);
      total.metric.push_back(metric);
      metric.gauge.value = static_cast<double>(gpu.total_bytes - gpu.free_bytes);
      used.metric.push_back(metric);
    }
  }
  return {total, used};
}

}  // namespace placer::server
