#include "server/model_loading.h"

#include <spdlog/spdlog.h>

#include <optional>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "loader/architectures/architecture.h"
#include "loader/checkpoint.h"
#include "loader/quantized_slots.h"
#include "loader/dtype.h"
#include "placement/cuda_probe.h"
#include "placement/plan_report.h"
#include "placement/prequantized_summary.h"
#include "model/bf16_repacker.h"
#include "model/causal_lm.h"
#include "model/packed_kernels_note.h"
#include "model/int8_activation_tiles.h"
#include "model/quantized_vnni.h"
#include "model/generation_defaults.h"
#include "model/tokenizer/tokenizer.h"
#include "base/status_macros.h"

namespace placer::server {
namespace {

// The weights --quantize-activations int8 reaches: packed ones (packed under `quantize` or
// repacked from the checkpoint) the kernel applies to (model/quantized_vnni.h); a tied table
// counted once.
int64_t Int8ActivationWeights(const loader::Checkpoint& checkpoint,
                              const loader::QuantizeOptions& quantize) {
  const loader::ArchitectureDescription architecture =
      loader::DescribeArchitecture(checkpoint.config());
  std::set<std::string> reached;
  for (const loader::TensorDescription* slot : architecture.Slots()) {
    std::optional<loader::PackedLayout> layout;
    if (const loader::QuantizedLinearSource* source = checkpoint.QuantizedLinear(slot->name)) {
      layout = source->layout;
    } else if (const std::optional<loader::QuantizeOptions> options =
                   loader::SlotQuantization(*slot, quantize)) {
      const bool in_out = loader::PackedOrientation(*slot) == loader::LinearWeight::kInOut;
      if (slot->shape.size() != 2) continue;
      absl::StatusOr<loader::PackedLayout> planned = loader::PackedLayoutFor(
          *options, slot->shape[in_out ? 1 : 0], slot->shape[in_out ? 0 : 1], slot->name);
      if (planned.ok()) layout = *planned;
    }
    if (layout && model::Int8ActivationKernelApplies(*layout)) reached.insert(slot->source());
  }
  return static_cast<int64_t>(reached.size());
}

// A tokenizer.json placer cannot run does not stop the model from serving token ids: text
// requests are refused with the reason instead.
void LoadTokenizer(const loader::Checkpoint& checkpoint, ModelSnapshot* snapshot) {
  if (!checkpoint.has_tokenizer()) return;
  static const nlohmann::json kNoConfig;
  auto tokenizer = tokenizer::Tokenizer::FromJson(
      *checkpoint.tokenizer(),
      checkpoint.tokenizer_config() ? *checkpoint.tokenizer_config() : kNoConfig);
  if (!tokenizer.ok()) {
    snapshot->tokenizer_error = std::string(tokenizer.status().message());
    spdlog::warn("{}: the tokenizer cannot be used, text requests will be refused: {}",
                 checkpoint.dir(), snapshot->tokenizer_error);
    return;
  }
  if ((*tokenizer)->vocab_size() > checkpoint.config().vocab_size) {
    spdlog::warn("{}: the tokenizer has {} tokens but the model only {}; prompts that use the "
                 "extra ids will be refused", checkpoint.dir(), (*tokenizer)->vocab_size(),
                 checkpoint.config().vocab_size);
  }
  snapshot->tokenizer = *std::move(tokenizer);
  snapshot->has_tokenizer = true;
}

}  // namespace

absl::StatusOr<ModelSnapshot> LoadServedModel(const std::string& dir,
                                              placement::PlacementOptions placement,
                                              const StagedLoad* staged) {

  // Open validates the whole checkpoint from its headers (no tensor data), so every file
  // error is reported by the loader before planning reads the same headers again.
  PLACER_ASSIGN_OR_RETURN(auto checkpoint, loader::Checkpoint::Open(dir));

  placement.gpu_probe = placement::CudaGpuProbe();
  placement::Plan plan;
  if (staged != nullptr) {
    plan = staged->plan;
  } else {
    placement::PlanCommandArgs args;
    args.checkpoint_dir = dir;
    args.placement = placement;
    PLACER_ASSIGN_OR_RETURN(plan, placement::BuildPlan(args));
  }
  spdlog::info("compute dtype {}: {}", std::string(loader::DTypeName(*plan.sizing.compute_dtype)),
               plan.sizing.compute_dtype_source);
  if (*plan.sizing.compute_dtype == loader::DType::kBF16) {
    if (const std::string note = model::Bf16WeightLayoutNote(); !note.empty()) {
      spdlog::info("{}", note);
    }
  }
  spdlog::info("placement plan:\n{}", placement::PlanToTable(plan));
  if (const auto& prequantized = checkpoint->config().quantization) {
    spdlog::info("Quantized: {}",
                 placement::PrequantizedSummary(*prequantized, plan.sizing.compute_dtype,
                                                plan.sizing.quantize));
  }
  const int64_t int8_activation_weights =
      plan.sizing.quantize.int8_activations ? Int8ActivationWeights(*checkpoint, plan.sizing.quantize) : 0;
  if (plan.sizing.quantize.int8_activations && int8_activation_weights == 0) {
    spdlog::warn("--quantize-activations int8: no weight of this model takes int8 activations "
                 "(only 4-bit weights in groups of 32, 64 or a multiple of 128 and 8-bit weights in "
                 "groups of a multiple of 128 or one per output channel do: --quantize int4 or int8, "
                 "--quantize-lm-head, or such a checkpoint); activations stay float (exact)");
  } else if (plan.sizing.quantize.int8_activations) {
    if (model::Int8ActivationKernelRuns()) {
      spdlog::info("--quantize-activations int8: {} packed weights (4-bit in groups of 32, 64 or a "
                   "multiple of 128, 8-bit in groups of a multiple of 128) multiply int8 activations "
                   "(one scale per 32, 64 or 128 inputs, {}{}); other weights keep float activations",
                   int8_activation_weights,
                   model::Int8ActivationIsaName(model::DetectInt8ActivationIsa()),
                   model::Int8ActivationTilesRun()
                       ? "; prompt chunks past 16 rows on AMX-INT8 tiles, blocks of 64 or 128"
                       : "");
    } else {
      spdlog::warn("--quantize-activations int8: this CPU lacks AVX2; activations stay "
                   "float (exact)");
    }
  }
  if (plan.sizing.quantize.packs_any() || checkpoint->config().quantization) {
    if (const std::string note = model::PackedKernelsNote(*plan.sizing.compute_dtype);
        !note.empty()) {
      spdlog::info("{}", note);
    }
  }
  const std::vector<std::string> offloaded = placement::OffloadedBlocks(plan);
  if (!offloaded.empty()) {
    spdlog::info("offload execution: {} on {} for {} blocks: {}",
                 placement::OffloadExecutionName(plan), plan.execution_device.Name(),
                 offloaded.size(), plan.execution_reason);
  }

  std::vector<std::string> device_names;
  for (const placement::DevicePlan& device : plan.devices)
    device_names.push_back(device.device.Name());
  auto accounting = std::make_shared<runtime::RuntimeAccounting>(device_names);
  auto model = model::LoadPlacedModel(checkpoint, plan, accounting,
                                      staged != nullptr ? staged->hooks
                                                        : std::vector<std::shared_ptr<runtime::BlockHook>>{});
  if (!model.ok()) return model.status();

  ModelSnapshot snapshot;
  snapshot.state = ModelState::kReady;
  snapshot.path = dir;
  snapshot.architecture = std::string(loader::ArchitectureName(checkpoint->config().architecture));
  snapshot.dtype = std::string(loader::DTypeName(checkpoint->dtype()));
  snapshot.compute_dtype = std::string(loader::DTypeName(*plan.sizing.compute_dtype));
  snapshot.limits = plan.sizing.limits;
  snapshot.parameter_count = static_cast<uint64_t>(checkpoint->parameter_count());
  LoadTokenizer(*checkpoint, &snapshot);
  checkpoint->ReleaseTokenizerFiles();
  snapshot.model = std::move(*model);
  PLACER_ASSIGN_OR_RETURN(snapshot.generation, model::ReadGenerationDefaults(*checkpoint));
  if (staged != nullptr) snapshot.device_map = staged->group_device_map;
  for (const auto& [module, device] : staged != nullptr ? decltype(plan.device_map){} : plan.device_map) {
    // GPUs are integers in Hugging Face's maps; the proto map holds them as "0", "1", ...
    const nlohmann::json hf_device = placement::DeviceToHfJson(device);
    snapshot.device_map.emplace_back(
        module, hf_device.is_string() ? hf_device.get<std::string>() : hf_device.dump());
  }
  snapshot.accounting = accounting;
  if (const auto& prequantized = checkpoint->config().quantization) {
    snapshot.quantization.source = "checkpoint";
    snapshot.quantization.summary =
        placement::PrequantizedSummary(*prequantized, plan.sizing.compute_dtype,
                                       plan.sizing.quantize);
  } else if (plan.sizing.quantize.packs_any()) {
    snapshot.quantization.source =
        plan.sizing.quantize.enabled() ? "--quantize" : "--quantize-lm-head";
    snapshot.quantization.summary = placement::QuantizationSummary(plan);
  }
  if (!snapshot.quantization.source.empty()) {
    snapshot.quantization.activations =
        int8_activation_weights > 0 && model::Int8ActivationKernelRuns() ? "int8" : "float";
  }
  snapshot.offload_execution = {placement::OffloadExecutionName(plan),
                                plan.execution_device.Name(), plan.execution_reason,
                                static_cast<uint32_t>(plan.staging_slots), offloaded};
  for (const placement::DevicePlan& device : plan.devices) {
    snapshot.devices.push_back({device.device.Name(), device.total_bytes, device.free_bytes,
                                device.weights_bytes, device.kv_reserve_bytes,
                                device.reserved_bytes()});
  }
  return snapshot;
}

}  // namespace placer::server
