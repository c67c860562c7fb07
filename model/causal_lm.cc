#include "model/causal_lm.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "loader/checkpoint.h"
#include "model/gpt2.h"
#include "model/llama.h"
#include "model/quantized_linear.h"

namespace placer::model {

absl::StatusOr<std::unique_ptr<CausalLm>> LoadCausalLm(
    std::shared_ptr<const loader::Checkpoint> checkpoint, ModelRuntime runtime) {
  if (runtime.accounting == nullptr) {
    std::vector<std::string> devices;
    for (const auto& [module, device] : runtime.plan.device_map) devices.push_back(device.Name());
    runtime.accounting = std::make_shared<runtime::RuntimeAccounting>(std::move(devices));
  }
  if (runtime.compute_dtype != loader::DType::kF32 && runtime.compute_dtype != loader::DType::kBF16 &&
      runtime.compute_dtype != loader::DType::kF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("compute dtype ", std::string(loader::DTypeName(runtime.compute_dtype)),
                     ": placer computes in F32, BF16 or F16"));
  }
  if (runtime.compute_dtype == loader::DType::kF16 &&
      (!runtime.plan.execution_device.is_gpu() || runtime.plan.virtual_gpus)) {
    return absl::InvalidArgumentError(
        "compute dtype F16 needs a real GPU to execute on (the CPU has no F16 matrix "
        "multiply, and virtual GPUs compute on it); use BF16 or F32");
  }
  SetInt8Activations(runtime.plan.quantize.int8_activations);
  try {
    if (checkpoint->config().is_gpt2()) return LoadGpt2(checkpoint, runtime);
    return LoadLlama(checkpoint, runtime);
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat(checkpoint->dir(), ": binding weights failed: ", e.what_without_backtrace()));
  }
}

absl::StatusOr<std::unique_ptr<CausalLm>> LoadPlacedModel(
    std::shared_ptr<const loader::Checkpoint> checkpoint, const placement::Plan& plan,
    std::shared_ptr<runtime::RuntimeAccounting> accounting,
    std::vector<std::shared_ptr<runtime::BlockHook>> extra_hooks) {
  if (!plan.sizing.compute_dtype) {
    return absl::InvalidArgumentError(
        "the plan was made for a module tree, not a checkpoint: it has no compute dtype");
  }
  if (accounting == nullptr) {
    std::vector<std::string> devices;
    for (const placement::DevicePlan& device : plan.devices) devices.push_back(device.device.Name());
    accounting = std::make_shared<runtime::RuntimeAccounting>(std::move(devices));
  }
  ModelRuntime runtime;
  runtime.plan = runtime::RuntimePlan::FromPlan(plan);
  runtime.accounting = std::move(accounting);
  runtime.max_sequence_length = plan.sizing.limits.max_seq_len;
  runtime.kv_cache_blocks = plan.sizing.kv_cache_blocks;
  runtime.compute_dtype = *plan.sizing.compute_dtype;
  runtime.extra_hooks = std::move(extra_hooks);
  return LoadCausalLm(std::move(checkpoint), std::move(runtime));
}

void SetComputeThreads(int threads) { at::set_num_threads(threads); }

std::string BlasLibraryInUse() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const size_t path = line.find('/');
    if (path == std::string::npos) continue;
    const std::string file = line.substr(path);
    const std::string name = file.substr(file.rfind('/') + 1);
    if (name.rfind("libblas.so", 0) == 0 || name.rfind("libopenblas", 0) == 0) return file;
  }
  return "none";
}
int ComputeThreads() { return at::get_num_threads(); }

}  // namespace placer::model
