#include "server/stage_metrics.h"

#include <string>

namespace placer::server {
namespace {

prometheus::MetricFamily Family(const std::string& name, const std::string& help,
                                prometheus::MetricType type) {
  prometheus::MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = type;
  return family;
}

void Add(prometheus::MetricFamily& family, std::vector<prometheus::ClientMetric::Label> labels,
         double value) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  if (family.type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
}

}  // namespace

std::vector<prometheus::MetricFamily> StageMetrics::Collect() const {
  const StageLeader* leader = leader_.load();
  if (leader == nullptr) return {};
  auto stages = Family("placer_stages", "placerd processes (pipeline stages) serving the model",
                       prometheus::MetricType::Gauge);
  Add(stages, {}, leader->stages());
  auto memory = Family("placer_stage_device_memory_planned_bytes",
                       "each stage's device memory as its plan holds it, by node, device and kind",
                       prometheus::MetricType::Gauge);
  for (const StageDeviceFigures& device : leader->group_devices()) {
    const std::string node = "node" + std::to_string(device.node);
    Add(memory, {{"node", node}, {"device", device.device}, {"kind", "total"}},
        static_cast<double>(device.total_bytes));
    Add(memory, {{"node", node}, {"device", device.device}, {"kind", "weights"}},
        static_cast<double>(device.weights_bytes));
    Add(memory, {{"node", node}, {"device", device.device}, {"kind", "kv_cache"}},
        static_cast<double>(device.kv_reserve_bytes));
  }
  auto used = Family("placer_stage_device_memory_used_bytes",
                     "what each stage's runtime holds on its devices now, by node, device and "
                     "kind (the workers' as they published it within the last second)",
                     prometheus::MetricType::Gauge);
  if (const std::shared_ptr<const ModelSnapshot> own = model_->Get();
      own != nullptr && own->accounting != nullptr) {
    for (const runtime::DeviceUsage& usage : own->accounting->Figures().devices) {
      for (int kind = 0; kind < runtime::kMemoryKinds; ++kind) {
        Add(used, {{"node", "node0"}, {"device", usage.device},
                   {"kind", runtime::MemoryKindName(static_cast<runtime::MemoryKind>(kind))}},
            static_cast<double>(usage.used_bytes[static_cast<size_t>(kind)]));
      }
    }
  }
  for (const auto& [rank, uses] : leader->WorkersMemory()) {
    for (const StageMemoryUse& use : uses) {
      Add(used, {{"node", "node" + std::to_string(rank)}, {"device", use.device}, {"kind", use.kind}},
          static_cast<double>(use.bytes));
    }
  }
  auto sent = Family("placer_stage_sent_bytes_total",
                     "bytes of steps (headers, rows, hidden states) the leader sent to stage 1",
                     prometheus::MetricType::Counter);
  Add(sent, {}, static_cast<double>(leader->bytes_sent()));
  auto wait = Family("placer_stage_wait_seconds_total",
                     "time forward passes waited for the other stages' layers and hops",
                     prometheus::MetricType::Counter);
  Add(wait, {}, leader->wait_seconds());
  return {stages, memory, used, sent, wait};
}

}  // namespace placer::server
