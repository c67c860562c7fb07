#include "bench/loaded_model.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "bench/bench_common.h"
#include "bench/bench_layouts.h"
#include "loader/checkpoint.h"
#include "loader/quantized_layout.h"
#include "placement/checkpoint_tensors.h"
#include "placement/model_module_tree.h"

namespace placer::bench {
namespace {

// --quantize packs the decoder layers' linear weights (the Llama family's names; bench/run
// quantizes Llama checkpoints only): the bytes a step reads of such a tensor are its packed ones.
bool IsLlamaLayerLinearWeight(const std::string& name) {
  if (name.rfind("model.layers.", 0) != 0) return false;
  for (const char* slot : {".self_attn.q_proj.weight", ".self_attn.k_proj.weight",
                           ".self_attn.v_proj.weight", ".self_attn.o_proj.weight",
                           ".mlp.gate_proj.weight", ".mlp.up_proj.weight", ".mlp.down_proj.weight"}) {
    const std::string suffix = slot;
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return true;
    }
  }
  return false;
}

// placerd's --dtype: `auto` is the dtype the checkpoint stores (placement::CheckpointDType),
// F16 computing as BF16 on the CPU, so that the bench runs what the daemon would.
absl::StatusOr<loader::DType> ComputeDtype(const std::string& flag, const std::string& dir) {
  if (flag != "auto") {
    absl::StatusOr<loader::DType> dtype = loader::ParseTorchDTypeName(flag);
    if (!dtype.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--dtype '", flag, "': ", dtype.status().message()));
    }
    return *dtype;
  }
  PLACER_ASSIGN_OR_RETURN(const placement::CheckpointSummary summary,
                          placement::ReadCheckpointSummary(dir));
  const loader::DType stored = placement::CheckpointDType(summary.config, summary.tensors);
  return stored == loader::DType::kF16 ? loader::DType::kBF16 : stored;
}

}  // namespace

absl::StatusOr<LoadedModel> Load(const ModelArgs& args) {
  model::SetComputeThreads(args.threads);
  const Clock::time_point start = Clock::now();
  PLACER_ASSIGN_OR_RETURN(auto checkpoint, loader::Checkpoint::Open(args.dir));
  const loader::ModelConfig& config = checkpoint->config();
  PLACER_ASSIGN_OR_RETURN(auto plan,
                          LayoutPlan(args.layout, config, !args.no_prefetch, args.offload_dir));
  PLACER_ASSIGN_OR_RETURN(plan.quantize,
                          loader::ParseQuantizeOptions(args.quantize, args.quantize_group_size,
                                                       args.quantize_lm_head,
                                                       args.quantize_activations));
  PLACER_ASSIGN_OR_RETURN(const loader::DType compute_dtype, ComputeDtype(args.dtype, args.dir));
  LoadedModel loaded;
  loaded.accounting = std::make_shared<runtime::RuntimeAccounting>(
      std::vector<std::string>{"cuda:0", "cpu", "disk"});
  model::ModelRuntime runtime;
  runtime.plan = plan;
  runtime.accounting = loaded.accounting;
  runtime.compute_dtype = compute_dtype;
  loaded.compute_dtype = compute_dtype;
  auto model = model::LoadCausalLm(checkpoint, runtime);
  if (!model.ok()) return model.status();
  loaded.model = *std::move(model);
  loaded.load_seconds = Seconds(start, Clock::now());
  for (const auto& [name, info] : checkpoint->tensors()) {
    loaded.weight_bytes += static_cast<int64_t>(info.nbytes());
    // Float weights are read in the compute dtype they were bound in.
    const auto bytes = static_cast<int64_t>(
        loader::IsFloatingDType(info.dtype) ? info.num_elements * loader::DTypeSize(compute_dtype)
                                            : info.nbytes());
    const bool embedding = name == "model.embed_tokens.weight" || name == "transformer.wte.weight" ||
                           name == "transformer.wpe.weight";
    // A tied head reads the whole embedding matrix anyway; an untied one reads one row of it.
    const bool reads_whole = !embedding || (config.tie_word_embeddings && name != "transformer.wpe.weight");
    // --quantize-lm-head packs the head's weight: its own, or the embedding table it is tied to.
    const bool tied_table = config.tie_word_embeddings && embedding && name != "transformer.wpe.weight";
    const bool packed_head =
        plan.quantize.quantizes_lm_head() && (name == "lm_head.weight" || tied_table);
    if (((plan.quantize.enabled() && IsLlamaLayerLinearWeight(name)) || packed_head) &&
        info.shape.size() == 2) {
      PLACER_ASSIGN_OR_RETURN(
          const loader::PackedLayout layout,
          loader::PackedLayoutFor(packed_head ? plan.quantize.LmHead() : plan.quantize,
                                  info.shape[0], info.shape[1], name));
      loaded.decode_read_bytes += static_cast<int64_t>(layout.bytes());
      continue;
    }
    loaded.decode_read_bytes += reads_whole ? bytes : bytes / std::max<int64_t>(info.shape[0], 1);
  }
  return loaded;
}

uint64_t StagedBytes(const runtime::RuntimeAccounting& accounting) {
  uint64_t total = 0;
  for (const runtime::TransferTotal& t : accounting.Figures().transfers) {
    if ((t.from == "cpu" || t.from == "disk") && t.to.rfind("cuda:", 0) == 0) total += t.bytes;
  }
  return total;
}

nlohmann::json BaseReport(const ModelArgs& args, const LoadedModel& loaded) {
  return {{"dir", args.dir},
          {"layout", args.layout},
          {"prefetch", !args.no_prefetch},
          {"threads", model::ComputeThreads()},
          {"blas", model::BlasLibraryInUse()},
          {"load_seconds", loaded.load_seconds},
          {"weight_bytes", loaded.weight_bytes},
          {"decode_read_bytes_per_token", loaded.decode_read_bytes},
          {"quantize", args.quantize},
          {"quantize_lm_head", args.quantize_lm_head},
          {"quantize_activations", args.quantize_activations},
          {"compute_dtype", std::string(loader::DTypeName(loaded.compute_dtype))},
          // What the weights take where they were bound (packed under --quantize).
          {"bound_weight_bytes", [&] {
             uint64_t bytes = 0;
             for (const char* device : {"cuda:0", "cpu", "disk"}) {
               bytes += loaded.accounting->Used(device, runtime::MemoryKind::kWeights);
             }
             return bytes;
           }()}};
}

}  // namespace placer::bench
