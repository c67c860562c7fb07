#include "placement/plan_command.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "placement/budget.h"
#include "placement/checkpoint_tensors.h"
#include "placement/device_map.h"
#include "placement/device_map_validation.h"
#include "placement/memory_flags.h"
#include "placement/model_module_tree.h"
#include "placement/module_subtree.h"
#include "placement/module_tree_json.h"
#include "loader/checkpoint_files.h"
#include "placement/plan_report.h"
#include "placement/prequantized_summary.h"
#include "placement/planner.h"
#include "placement/reserves.h"
#include "base/status_macros.h"

namespace placer::placement {
namespace {

constexpr std::int64_t kDefaultMaxSeqLen = 4096;

struct ModelToPlan {
  ModuleTreeSpec spec;
  std::optional<loader::DType> compute_dtype;
  std::uint64_t activation_reserve_bytes = 0;
  ServingLimits limits;
  std::int64_t kv_cache_blocks = 0;
  std::string dtype_source;  // why compute_dtype, for the start log
  loader::QuantizeOptions quantize;
};

// `--dtype auto` (or none): the dtype the checkpoint stores, so its pages bind as they are.
bool IsAutoDType(const std::string& dtype) { return dtype.empty() || dtype == "auto"; }

absl::StatusOr<ModelToPlan> LoadModel(const PlanCommandArgs& args, bool real_gpus) {
  ModelToPlan model;
  if (!IsAutoDType(args.placement.dtype)) {
    absl::StatusOr<loader::DType> dtype = loader::ParseTorchDTypeName(args.placement.dtype);
    if (!dtype.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dtype '", args.placement.dtype, "': ", dtype.status().message()));
    }
    model.compute_dtype = *dtype;
  }
  PLACER_ASSIGN_OR_RETURN(model.quantize, loader::ParseQuantizeOptions(
                                              args.placement.quantize,
                                              args.placement.quantize_group_size,
                                              args.placement.quantize_lm_head,
                                              args.placement.quantize_activations));
  if (args.placement.max_batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-batch-size ", args.placement.max_batch_size, ": must be at least 1"));
  }
  if (args.placement.max_seq_len < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-seq-len ", args.placement.max_seq_len, ": must not be negative"));
  }
  if (!args.module_tree_path.empty()) {
    if (args.placement.max_seq_len > 0) {
      return absl::InvalidArgumentError(
          "--max-seq-len needs a checkpoint's config.json: a --module-tree has no attention "
          "shape to size the KV cache from");
    }
    if (model.quantize.packs_any()) {
      return absl::InvalidArgumentError(
          "--quantize and --quantize-lm-head need a checkpoint's config.json: a --module-tree "
          "does not say which tensors are linear weights");
    }
    absl::StatusOr<ModuleTreeSpec> spec = ReadModuleTreeFile(args.module_tree_path);
    if (!spec.ok()) return spec.status();
    model.spec = *std::move(spec);
    return model;
  }
  PLACER_ASSIGN_OR_RETURN(CheckpointSummary checkpoint, ReadCheckpointSummary(args.checkpoint_dir));
  const loader::ModelConfig& config = checkpoint.config;
  PLACER_ASSIGN_OR_RETURN(ServingLimits serving, ServingLimitsFor(args.placement, config));
  const ServingLimits& limits = serving;
  loader::DType dtype = model.compute_dtype.value_or(CheckpointDType(config, checkpoint.tensors));
  if (model.compute_dtype) {
    model.dtype_source = absl::StrCat("--dtype ", args.placement.dtype);
  } else if (dtype == loader::DType::kF16 && !real_gpus) {
    // The cpu (and virtual GPUs, which compute on it) has no F16 matrix multiply.
    dtype = loader::DType::kBF16;
    model.dtype_source =
        "the checkpoint's F16, computed as BF16: no real GPU, and the cpu has no F16 matrix "
        "multiply (--dtype auto)";
  } else {
    model.dtype_source = absl::StrCat("the checkpoint's (--dtype auto)");
  }
  absl::StatusOr<ModuleTreeSpec> spec = ModuleTreeSpecForModel(
      config, checkpoint.tensors, KvCacheBytesPerLayer(config, limits, dtype), model.quantize);
  if (!spec.ok()) return spec.status();
  model.spec = *std::move(spec);
  model.activation_reserve_bytes =
      ActivationReserveBytes(config, limits, dtype) +
      DequantizedWeightReserveBytes(
          config, model.quantize.enabled() || config.quantization.has_value(),
          model.quantize.quantizes_lm_head() ||
              (config.quantization.has_value() && config.quantization->quantized_lm_head),
          dtype);
  model.compute_dtype = dtype;
  model.limits = limits;
  model.kv_cache_blocks = KvCacheBlocks(limits, config.shared_attention_window());
  return model;
}

}  // namespace

absl::StatusOr<ServingLimits> ServingLimitsFor(const PlacementOptions& options,
                                               const loader::ModelConfig& config) {
  ServingLimits limits;
  limits.max_batch_size = options.max_batch_size;
  const std::int64_t context =
      config.context_length() > 0 ? config.context_length() : kDefaultMaxSeqLen;
  // Never beyond the model's context: no sequence can be longer than that.
  limits.max_seq_len = options.max_seq_len > 0 ? std::min(options.max_seq_len, context)
                                            : std::min(context, kDefaultMaxSeqLen);
  if (options.max_batch_total_tokens < 0 ||
      (options.max_batch_total_tokens > 0 && options.max_batch_total_tokens < limits.max_seq_len)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-batch-total-tokens ", options.max_batch_total_tokens, ": must be 0 or at least "
        "the ", limits.max_seq_len, " positions of one sequence (--max-seq-len)"));
  }
  limits.max_batch_total_tokens = options.max_batch_total_tokens;
  return limits;
}

absl::StatusOr<Plan> BuildPlan(const PlanCommandArgs& args) {
  if (args.checkpoint_dir.empty() == args.module_tree_path.empty()) {
    return absl::InvalidArgumentError(
        "give either a checkpoint directory or --module-tree TREE.json (not both)");
  }
  absl::StatusOr<Strategy> strategy = ParseStrategy(args.placement.strategy);
  if (!strategy.ok()) return strategy.status();
  PLACER_ASSIGN_OR_RETURN(OffloadExec offload_exec, ParseOffloadExec(args.placement.offload_exec));

  InventoryOptions inventory;
  if (!args.placement.devices.empty()) {
    absl::StatusOr<VirtualDevices> virtual_devices = ParseVirtualDevices(args.placement.devices);
    if (!virtual_devices.ok()) return virtual_devices.status();
    inventory.virtual_devices = *virtual_devices;
  }
  inventory.gpu_probe = args.placement.gpu_probe;
  inventory.offload_dir = args.placement.offload_dir;
  inventory.meminfo_path = args.placement.meminfo_path;
  PLACER_ASSIGN_OR_RETURN(std::vector<DeviceInfo> devices, ProbeDevices(inventory));

  BudgetOptions budget_options;
  budget_options.gpu_memory_utilization = args.placement.gpu_memory_utilization;
  if (!args.placement.max_memory.empty()) {
    PLACER_ASSIGN_OR_RETURN(auto limits, ParseMaxMemory(args.placement.max_memory));
    budget_options.max_memory = limits;
  }
  PLACER_ASSIGN_OR_RETURN(std::vector<DeviceBudget> budgets,
                          ComputeBudgets(devices, budget_options));

  const bool real_gpus =
      args.placement.devices.empty() &&
      std::any_of(devices.begin(), devices.end(),
                  [](const DeviceInfo& device) { return device.device.is_gpu(); });
  PLACER_ASSIGN_OR_RETURN(ModelToPlan model, LoadModel(args, real_gpus));
  if (!args.stage_modules.empty()) {
    PLACER_ASSIGN_OR_RETURN(model.spec, SubtreeSpec(model.spec, args.stage_modules));
  }
  PLACER_ASSIGN_OR_RETURN(ModuleTree tree, ModuleTree::Build(model.spec, model.compute_dtype));

  PlanOptions options;
  options.strategy = *strategy;
  options.activation_reserve_bytes = model.activation_reserve_bytes;
  options.offload_exec = offload_exec;
  options.prefetch = args.placement.prefetch;
  // The cpu has no F16 matrix multiply: F16 blocks off the GPUs must be staged onto one.
  if (model.compute_dtype == loader::DType::kF16 && offload_exec != OffloadExec::kGpu) {
    if (offload_exec == OffloadExec::kCpu) {
      return absl::InvalidArgumentError(
          "--offload-exec cpu: compute dtype F16 cannot run on the cpu (no F16 matrix multiply "
          "there); use --offload-exec gpu, or --dtype BF16 or F32");
    }
    options.offload_exec = OffloadExec::kGpu;
  }
  absl::StatusOr<Plan> plan;
  if (args.device_map.has_value()) {
    plan = ValidateDeviceMap(tree, *args.device_map, budgets, options);
  } else if (!args.placement.device_map_path.empty()) {
    PLACER_ASSIGN_OR_RETURN(DeviceMap map, ReadDeviceMapFile(args.placement.device_map_path));
    plan = ValidateDeviceMap(tree, map, budgets, options);
  } else {
    plan = PlanPlacement(tree, budgets, options);
  }
  if (!plan.ok()) return plan.status();
  plan->sizing.limits = model.limits;
  plan->sizing.kv_cache_blocks = model.kv_cache_blocks;
  plan->sizing.compute_dtype = model.compute_dtype;
  plan->sizing.compute_dtype_source = model.dtype_source;
  plan->sizing.virtual_gpus = !args.placement.devices.empty();
  plan->sizing.prefetch = args.placement.prefetch && (!plan->offload_staged || plan->staging_slots == 2);
  plan->sizing.offload_dir = args.placement.offload_dir;
  plan->sizing.quantize = model.quantize;
  if (const std::optional<int> head = tree.FindTensor("lm_head.weight")) {
    plan->sizing.lm_head_tied = tree.tensors()[static_cast<std::size_t>(*head)].tied_group >= 0;
  }
  return plan;
}

absl::Status RunPlanCommand(const PlanCommandArgs& args, std::ostream& out) {
  if (args.format != "table" && args.format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("--format '", args.format, "': expected table or json"));
  }
  PLACER_ASSIGN_OR_RETURN(Plan plan, BuildPlan(args));
  std::optional<loader::PrequantizedFormat> prequantized;
  if (args.module_tree_path.empty()) {
    PLACER_ASSIGN_OR_RETURN(loader::CheckpointFiles files,
                            loader::FindCheckpointFiles(args.checkpoint_dir));
    PLACER_ASSIGN_OR_RETURN(loader::ModelConfig config, loader::ReadCheckpointConfig(files));
    prequantized = config.quantization;
  }
  const std::string summary =
      prequantized ? PrequantizedSummary(*prequantized, plan.sizing.compute_dtype, plan.sizing.quantize)
                   : "";
  if (args.format == "json") {
    nlohmann::ordered_json json = PlanToJson(plan);
    if (prequantized) {
      json["quantize"] = PrequantizedJson(*prequantized, summary, plan.sizing.quantize);
    }
    out << json.dump(2) << "\n";
  } else {
    out << PlanToTable(plan);
    if (prequantized) out << "\nQuantized: " << summary << "\n";
  }
  return absl::OkStatus();
}

}  // namespace placer::placement
