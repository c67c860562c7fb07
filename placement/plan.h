// The result of planning (or of validating a user's device map): which
// device holds each tensor, what each device carries, and why blocks went
// off the GPUs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loader/dtype.h"
#include "loader/quantized_layout.h"
#include "placement/device.h"
#include "placement/reserves.h"

namespace placer::placement {

// Accelerate's meanings: sequential fills cuda:0, then cuda:1, ...;
// balanced gives each GPU a similar share; balanced_low_0 does the same but
// leaves cuda:0 only what the other GPUs cannot take.
enum class Strategy { kSequential, kBalanced, kBalancedLow0 };

absl::StatusOr<Strategy> ParseStrategy(absl::string_view text);
absl::string_view StrategyName(Strategy strategy);

struct DevicePlan {
  Device device;
  std::string description;    // from the inventory
  std::string budget_source;  // how budget_bytes was chosen
  std::uint64_t total_bytes = 0;  // from the inventory (probe or --devices)
  std::uint64_t free_bytes = 0;   // when probed
  std::uint64_t budget_bytes = 0;
  std::uint64_t weights_bytes = 0;
  // KV cache of the decoder layers that run here (for the execution device
  // also those of offloaded layers).
  std::uint64_t kv_reserve_bytes = 0;
  std::uint64_t activation_reserve_bytes = 0;
  // Room to stage offloaded blocks: two slots of the largest one (execution device only).
  std::uint64_t staging_reserve_bytes = 0;

  std::uint64_t reserved_bytes() const {
    return kv_reserve_bytes + activation_reserve_bytes + staging_reserve_bytes;
  }
  // Negative only for a user device map that overflows (then refused).
  std::int64_t left_bytes() const {
    return static_cast<std::int64_t>(budget_bytes) -
           static_cast<std::int64_t>(weights_bytes + reserved_bytes());
  }
};

// One block as the planner placed it, in placement order. kv_bytes counts on
// `device` when kv_on_device, else on the execution device.
struct PlacementStep {
  std::string name;
  Device device;
  std::uint64_t weights_bytes = 0;
  std::uint64_t kv_bytes = 0;
  bool kv_on_device = false;
  std::vector<int> tensors;  // indices into ModuleTree::tensors()
};

// What a plan was sized for, which the run time must use as it is (never recompute it): the
// one hand-off from planning to running (model::LoadPlacedModel).
struct PlanSizing {
  ServingLimits limits;            // the KV and activation reserves' assumptions; 0s for a tree
  std::int64_t kv_cache_blocks = 0;  // the paged KV pool: exactly the KV reserve, in blocks
  // The dtype the weights' sizes were counted in; unset for a module tree in its own dtypes.
  std::optional<loader::DType> compute_dtype;
  std::string compute_dtype_source;  // "--dtype BF16", "the checkpoint's (--dtype auto)", ...
  bool virtual_gpus = false;  // --devices: GPUs backed by host memory
  bool prefetch = true;       // the staging reserve is two slots: stage ahead of compute
  std::string offload_dir;    // where disk tensors in another dtype are converted to
  // --quantize: decoder-layer linear weights were sized (and are bound) packed.
  loader::QuantizeOptions quantize;
  // The lm_head reads the token embedding's table (tie_word_embeddings): under
  // --quantize-lm-head that one table is packed.
  bool lm_head_tied = false;
};

struct Plan {
  Strategy strategy = Strategy::kSequential;
  PlanSizing sizing;
  // Balanced plans: why the shares were not kept (empty when they were).
  std::string strategy_note;
  Device execution_device;  // where offloaded blocks run (--offload-exec)
  // How: copied onto execution_device for each use through `staging_slots` buffers (2: the next
  // block is copied in while one computes; 1: each block when entered), or not staged (0): they
  // run on the cpu where their weights live and only activations move.
  bool offload_staged = false;
  int staging_slots = 0;
  std::string execution_reason;  // the choice, and why the better ones were not possible
  // Hugging Face form, in execution order: the coarsest modules whose
  // tensors all share a device.
  std::vector<std::pair<std::string, Device>> device_map;
  // Where each block computes (BlockExecutionDevice), in the same form and order: a block on
  // cpu or disk shows the GPU it is staged onto, or cpu.
  std::vector<std::pair<std::string, Device>> execution_map;
  std::vector<Device> tensor_devices;  // per ModuleTree tensor
  std::vector<DevicePlan> devices;     // inventory order
  // device-map key -> why it is not on a GPU; only for blocks off the GPUs
  // when GPUs exist (and for disk blocks, why not cpu).
  std::vector<std::pair<std::string, std::string>> reasons;
  std::vector<PlacementStep> steps;  // empty for a validated user map
  // A pipeline stage's plan: the blocks the other stages run, never bound here
  // (placement/stage_plan.h).
  std::vector<std::string> other_stage_blocks;
};

}  // namespace placer::placement
