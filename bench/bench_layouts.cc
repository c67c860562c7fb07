#include "bench/bench_layouts.h"

#include "absl/strings/str_cat.h"

namespace placer::bench {

using placement::Device;
using runtime::RuntimePlan;

absl::StatusOr<RuntimePlan> LayoutPlan(const std::string& layout,
                                       const loader::ModelConfig& config, bool prefetch,
                                       const std::string& offload_dir) {
  if (layout == "cpu") {
    RuntimePlan plan = RuntimePlan::AllOnCpu();
    plan.prefetch = prefetch;
    return plan;
  }
  RuntimePlan plan;
  plan.execution_device = Device::Cuda(0);
  plan.virtual_gpus = true;
  plan.prefetch = prefetch;
  plan.offload_dir = offload_dir;
  if (layout == "gpu") {
    plan.device_map = {{"", Device::Cuda(0)}};
  } else if (layout == "all-cpu" || layout == "all-disk") {
    plan.device_map = {{"", layout == "all-cpu" ? Device::Cpu() : Device::Disk()}};
  } else if (layout == "half-cpu" || layout == "half-disk") {
    if (config.architecture == loader::Architecture::kGpt2) {
      return absl::InvalidArgumentError(
          absl::StrCat("--layout ", layout, " names Llama-family modules; use gpu, cpu, all-cpu or "
                       "all-disk for model_type ", config.model_type));
    }
    const Device offload = layout == "half-cpu" ? Device::Cpu() : Device::Disk();
    // Accelerate's sequential planner fills the GPU from the front, so the tail is offloaded.
    plan.device_map = {{"", Device::Cuda(0)}, {"model.norm", offload}, {"lm_head", offload}};
    for (int64_t layer = config.num_hidden_layers / 2; layer < config.num_hidden_layers; ++layer) {
      plan.device_map.emplace_back(absl::StrCat("model.layers.", layer), offload);
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--layout ", layout, ": expected cpu, gpu, half-cpu, half-disk, all-cpu or all-disk"));
  }
  return plan;
}

}  // namespace placer::bench
