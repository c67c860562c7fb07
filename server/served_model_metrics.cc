#include "server/served_model_metrics.h"

#include <map>
#include <string>
#include <utility>

#include "placement/cuda_probe.h"
#include "placement/memory_flags.h"
#include "runtime/runtime_accounting.h"

namespace placer::server {
namespace {

using Labels = std::vector<prometheus::ClientMetric::Label>;

prometheus::MetricFamily NewFamily(const std::string& name, const std::string& help,
                                   prometheus::MetricType type) {
  prometheus::MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = type;
  return family;
}

void AddSample(prometheus::MetricFamily& family, Labels labels, double value) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  if (family.type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
}

struct DeviceMemory {
  std::string name;
  double total_bytes = 0, free_bytes = 0;
};

// One entry per device of the plan (or, before a plan exists, per probed device), with live
// figures where the probe has them.
std::vector<DeviceMemory> DeviceMemoryNow(
    const ModelSnapshot& model, const runtime::RuntimeFigures* runtime,
    const absl::StatusOr<std::vector<placement::DeviceInfo>>& probed) {
  std::map<std::string, const placement::DeviceInfo*> live;
  if (probed.ok()) {
    for (const placement::DeviceInfo& device : *probed) live[device.device.Name()] = &device;
  }
  std::vector<DeviceMemory> devices;
  if (model.devices.empty()) {
    if (probed.ok()) {
      for (const placement::DeviceInfo& device : *probed) {
        devices.push_back({device.device.Name(), static_cast<double>(device.total_bytes),
                           static_cast<double>(device.free_bytes)});
      }
    }
    return devices;
  }
  for (const ModelSnapshot::DeviceFigures& planned : model.devices) {
    DeviceMemory memory{planned.name, static_cast<double>(planned.total_bytes),
                        static_cast<double>(planned.free_bytes)};
    const auto found = live.find(planned.name);
    if (found != live.end()) {
      const placement::DeviceInfo& device = *found->second;
      memory.total_bytes = static_cast<double>(device.total_bytes);
      memory.free_bytes = static_cast<double>(device.free_bytes);
      if (device.is_virtual && runtime != nullptr) {
        uint64_t held = 0;
        for (const runtime::DeviceUsage& usage : runtime->devices) {
          if (usage.device != planned.name) continue;
          for (uint64_t bytes : usage.used_bytes) held += bytes;
        }
        memory.free_bytes =
            held >= device.total_bytes ? 0 : static_cast<double>(device.total_bytes - held);
      }
    }
    devices.push_back(std::move(memory));
  }
  return devices;
}

}  // namespace

ServedModelMetrics::ServedModelMetrics(const ModelSlot* model, DeviceProbe probe)
    : model_(model), probe_(std::move(probe)) {}

std::vector<prometheus::MetricFamily> ServedModelMetrics::Collect() const {
  using prometheus::MetricType;
  const std::shared_ptr<const ModelSnapshot> model = model_->Get();
  std::optional<runtime::RuntimeFigures> runtime;
  if (model->accounting != nullptr) runtime = model->accounting->Figures();
  const absl::StatusOr<std::vector<placement::DeviceInfo>> probed =
      probe_ ? probe_() : absl::StatusOr<std::vector<placement::DeviceInfo>>(
                              absl::UnavailableError("no probe"));

  auto total = NewFamily("placer_device_memory_total_bytes",
                         "Memory of each device (cuda:N, cpu, disk) as probed or given by --devices.",
                         MetricType::Gauge);
  auto free = NewFamily("placer_device_memory_free_bytes",
                        "Free memory of each device now (virtual devices: size less what placer holds).",
                        MetricType::Gauge);
  for (const DeviceMemory& device : DeviceMemoryNow(*model, runtime ? &*runtime : nullptr, probed)) {
    AddSample(total, {{"device", device.name}}, device.total_bytes);
    AddSample(free, {{"device", device.name}}, device.free_bytes);
  }

  auto used = NewFamily("placer_device_memory_used_bytes",
                        "Bytes placer holds on each device, by kind (weights, kv_cache, staging).",
                        MetricType::Gauge);
  auto kv_blocks = NewFamily("placer_device_kv_cache_blocks",
                             "KV-cache blocks on each device, by state (used, free).",
                             MetricType::Gauge);
  auto transferred = NewFamily("placer_offload_transferred_bytes_total",
                               "Bytes moved between devices to stage offloaded weights and activations.",
                               MetricType::Counter);
  auto wait = NewFamily("placer_offload_wait_seconds_total",
                        "Time compute waited for offloaded weights to be staged.",
                        MetricType::Counter);
  AddSample(wait, {}, runtime ? runtime->offload_wait_seconds : 0);
  auto block_compute = NewFamily("placer_block_compute_seconds_total",
                                 "Host time spent running each block (embedding, decoder layers, "
                                 "norm, lm_head); on GPUs the time to issue its kernels.",
                                 MetricType::Counter);
  if (runtime) {
    for (const runtime::BlockCompute& block : runtime->block_compute) {
      AddSample(block_compute, {{"block", block.block}}, block.seconds);
    }
    for (const runtime::DeviceUsage& device : runtime->devices) {
      for (int kind = 0; kind < runtime::kMemoryKinds; ++kind) {
        AddSample(used,
                  {{"device", device.device},
                   {"kind", runtime::MemoryKindName(static_cast<runtime::MemoryKind>(kind))}},
                  static_cast<double>(device.used_bytes[kind]));
      }
      AddSample(kv_blocks, {{"device", device.device}, {"state", "used"}},
                static_cast<double>(device.kv_blocks_used));
      AddSample(kv_blocks, {{"device", device.device}, {"state", "free"}},
                static_cast<double>(device.kv_blocks_free));
    }
    for (const runtime::TransferTotal& transfer : runtime->transfers) {
      AddSample(transferred, {{"from", transfer.from}, {"to", transfer.to}},
                static_cast<double>(transfer.bytes));
    }
  }

  auto load_seconds = NewFamily("placer_model_load_seconds",
                                "Seconds from opening the checkpoint to serving it.",
                                MetricType::Gauge);
  auto warm_up_seconds =
      NewFamily("placer_model_warm_up_seconds",
                "Seconds of --warm-up's forward pass before serving (part of the load seconds).",
                MetricType::Gauge);
  auto info = NewFamily("placer_model_info", "The served model; always 1.", MetricType::Gauge);
  if (model->state == ModelState::kReady) {
    AddSample(load_seconds, {}, model->load_seconds);
    if (model->warm_up_seconds > 0) AddSample(warm_up_seconds, {}, model->warm_up_seconds);
    AddSample(info, {{"architecture", model->architecture}, {"dtype", model->dtype}}, 1);
  }

  std::vector<prometheus::MetricFamily> families;
  for (auto* family : {&total, &free, &used, &kv_blocks, &transferred, &wait, &block_compute,
                       &load_seconds, &warm_up_seconds, &info}) {
    families.push_back(std::move(*family));
  }
  return families;
}

ServedModelMetrics::DeviceProbe LiveDeviceProbe(const placement::PlacementOptions& placement) {
  placement::InventoryOptions inventory;
  if (!placement.devices.empty()) {
    auto virtual_devices = placement::ParseVirtualDevices(placement.devices);
    // placerd refuses a bad --devices before it serves; nothing to probe then.
    if (!virtual_devices.ok()) return nullptr;
    inventory.virtual_devices = *virtual_devices;
  }
  inventory.gpu_probe = placement::CudaGpuProbe();
  inventory.offload_dir = placement.offload_dir;
  inventory.meminfo_path = placement.meminfo_path;
  return [inventory] { return placement::ProbeDevices(inventory); };
}

}  // namespace placer::server
