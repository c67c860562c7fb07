// The GPU memory metrics Triton Inference Server exports (nv_gpu_memory_total_bytes and
// nv_gpu_memory_used_bytes, labelled gpu_uuid), so dashboards built for Triton chart placerd
// too. Whole-device figures (every process), read at scrape time; real CUDA GPUs only.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <vector>

namespace placer::server {

class NvGpuMetrics final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;

  // Whether this build and machine have CUDA GPUs to report (never for virtual devices).
  static bool Available();
};

}  // namespace placer::server
