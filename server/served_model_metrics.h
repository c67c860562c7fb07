// Metrics read from the served model at every scrape: per-device memory (total, free, used by
// kind), KV-cache blocks, offload traffic and wait, load time and model identity. Reading at
// scrape time means the figures are as fresh as the runtime's accounting, with no thread
// copying them around.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/device_inventory.h"
#include "placement/plan_command.h"
#include "server/model_slot.h"

namespace placer::server {

class ServedModelMetrics final : public prometheus::Collectable {
 public:
  // The devices as the probe sees them now (empty function: use the plan's figures only).
  using DeviceProbe = std::function<absl::StatusOr<std::vector<placement::DeviceInfo>>()>;

  // `model` must outlive every scrape.
  ServedModelMetrics(const ModelSlot* model, DeviceProbe probe);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const ModelSlot* model_;
  DeviceProbe probe_;
};

// Probes the devices the way placerd planned them (same --devices, GPU probe and offload
// dir), so free memory of real devices is read live at each scrape. Virtual devices have no
// other user, so their free memory is their size less what placer holds on them.
ServedModelMetrics::DeviceProbe LiveDeviceProbe(const placement::PlacementOptions& placement);

}  // namespace placer::server
