// `placer plan`: plans a real checkpoint (config.json + safetensors headers,
// no weight bytes read) or a hypothetical model (--module-tree TREE.json),
// or validates a user's --device-map, and prints the result. placerd builds
// its plan through BuildPlan so both answer the same.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "placement/device_inventory.h"
#include "placement/device_map.h"
#include "loader/model_config.h"
#include "placement/plan.h"
#include "placement/reserves.h"

namespace placer::placement {

// How to place a model: the flags `placerd` and `placer plan` share (plan_flags.h), so both
// plan the same way. The plan records what it was sized for (Plan::sizing).
struct PlacementOptions {
  std::string devices;           // --devices (virtual devices); empty: probe
  std::string max_memory;        // --max-memory; empty: utilization / margin
  double gpu_memory_utilization = 0.90;
  std::string strategy = "sequential";
  // 0: min(max_position_embeddings, 4096) for a checkpoint. A module tree
  // has no config, so it gets no KV or activation reserve.
  std::int64_t max_seq_len = 0;
  std::int64_t max_batch_size = 8;  // sequences placerd runs at once (continuous batching)
  std::int64_t max_batch_total_tokens = 0;  // KV positions they share; 0: seq len x batch
  std::string dtype;         // compute dtype ("bfloat16" or "BF16"); "auto" or empty: the
                             // checkpoint's (F16 as BF16 without a real GPU)
  std::string offload_dir;   // empty: no disk device
  // --quantize none|int8|int4 and --quantize-group-size (0: the scheme's default): the
  // decoder layers' linear weights packed at load and planned in their packed bytes.
  std::string quantize = "none";
  std::int64_t quantize_group_size = 0;
  // --quantize-lm-head none|int8|int4: the lm_head packed too (a tied one: the shared table).
  std::string quantize_lm_head = "none";
  // --quantize-activations none|int8: 4-bit weights multiply int8 activations (AVX512-VNNI).
  std::string quantize_activations = "none";
  std::string device_map_path;  // validate this map instead of planning
  bool prefetch = true;      // stage the next offloaded block while the current one computes
  std::string offload_exec = "auto";  // where offloaded blocks run: auto | gpu | cpu
  GpuProbe gpu_probe;        // empty: no GPU (the CLI is torch-free)
  std::string meminfo_path = "/proc/meminfo";
};

// `placer plan`'s own arguments around the shared options.
struct PlanCommandArgs {
  std::string checkpoint_dir;    // exactly one of checkpoint_dir and
  std::string module_tree_path;  // module_tree_path
  std::string format = "table";  // table | json
  PlacementOptions placement;
  // A pipeline stage's share (placement/stage_plan.h): plan only the tensors under these
  // blocks; empty plans the whole model.
  std::vector<std::string> stage_modules;
  // A map made elsewhere (a pipeline group's leader, for this node's share): validated over
  // this node's devices (as --device-map is) instead of planned.
  std::optional<DeviceMap> device_map;
};

absl::StatusOr<Plan> BuildPlan(const PlanCommandArgs& args);

// The limits the reserves are sized for (and placerd serves): --max-seq-len defaulted from
// the model's context, --max-batch-size, --max-batch-total-tokens. Errors name the flag.
absl::StatusOr<ServingLimits> ServingLimitsFor(const PlacementOptions& options,
                                               const loader::ModelConfig& config);

// Writes the plan to `out` in args.format; errors are returned, not printed.
absl::Status RunPlanCommand(const PlanCommandArgs& args, std::ostream& out);

}  // namespace placer::placement
